"""Re-serializes an exported StableHLO module so that the consuming TensorFlow can run it.

Two steps, both needed with JAX 0.10 and TF 2.21:

1. `stablehlo.composite` ops become `func.call`s of their decomposition. JAX emits composites for
   e.g. `erf`, `asin`, `top_k`; TF's StableHLO is too old to know `composite_v2`, and TF's shape
   refinement does not look into a composite's decomposition, so a polymorphic module would
   keep dynamic shapes there and fail to compile. A call is refined like any function.
2. The module is written as a portable artifact at the consumer's StableHLO version (by default
   the installed TF's), which downgrades the VHLO ops to ones that TF reads.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax.interpreters.mlir as jax_mlir
from jax.extend import mlir as jax_extend_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func as func_dialect

from tf_ops import module_verify

ModuleCheck = Callable[[ir.Module], None]


def _composite_ops(module: ir.Module) -> list[ir.Operation]:
    found = []

    def walk(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    if child.operation.name == "stablehlo.composite":
                        found.append(child.operation)
                    walk(child.operation)

    walk(module.operation)
    return found


def inline_composites_as_calls(module: ir.Module) -> int:
    """Replaces every `stablehlo.composite` by a `func.call` of its decomposition.

    Returns the number of composites replaced. Must run inside the module's MLIR context.
    """
    composites = _composite_ops(module)
    for op in composites:
        decomposition = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
        with ir.InsertionPoint(op), op.location:
            call = func_dialect.CallOp([r.type for r in op.results],
                                       ir.FlatSymbolRefAttr.get(decomposition),
                                       list(op.operands))
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()
    return len(composites)


def module_bytes_for_tf(mlir_module_serialized: bytes, *,
                        stablehlo_version: str | None = None,
                        checks: Sequence[ModuleCheck] = ()) -> bytes:
    """Returns the module re-serialized for a TF that reads `stablehlo_version`.

    Args:
      mlir_module_serialized: `Exported.mlir_module_serialized` (a StableHLO portable artifact).
      stablehlo_version: the consumer's StableHLO version, e.g. "1.13.7"; None for the installed
        TF's. Must be between TF's minimum and current version.
      checks: callables run on the parsed module before it is written (e.g. the custom-call
        allowlist); they raise to reject the module.

    Example:
        >>> exp = jax.export.export(jax.jit(jax.lax.erf))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> blob = module_bytes_for_tf(exp.mlir_module_serialized)
    """
    # Imported here so that `reserialize` runs without TensorFlow (the artifact sandbox child).
    from tf_ops import versions
    target = stablehlo_version or versions.tf_stablehlo_version()
    wanted = versions.parse_stablehlo_version(target)
    newest = versions.parse_stablehlo_version(versions.tf_stablehlo_version())
    oldest = versions.parse_stablehlo_version(versions.tf_minimum_stablehlo_version())
    if not oldest <= wanted <= newest:
        raise ValueError(
            f"stablehlo_version {target} is outside what this TensorFlow can write "
            f"({versions.tf_minimum_stablehlo_version()}..{versions.tf_stablehlo_version()}). "
            f"Fix: pick a version in that range (the serving TF's "
            f"tensorflow.compiler.mlir.stablehlo.stablehlo.get_current_version()).")
    return reserialize(mlir_module_serialized, target, checks=checks)


def reserialize(mlir_module_serialized: bytes, target: str, *,
                checks: Sequence[ModuleCheck] = ()) -> bytes:
    """Parses, verifies, checks, inlines composites and writes the module at `target`.

    Unverified IR is never handed to a pass or the serializer: a corrupt module that the
    bytecode reader accepts can make them loop or abort.

    Raises:
      module_verify.ModuleVerifyError: the bytes do not parse, or the module fails MLIR's
        verifier (a ValueError).
    """
    with jax_mlir.make_ir_context() as context:
        # A corrupt module prints its parse diagnostics to stderr by default; they are in the
        # exception we raise, so keep stderr clean.
        context.emit_error_diagnostics = False
        try:
            module = jax_extend_mlir.deserialize_portable_artifact(mlir_module_serialized)
        except Exception as e:  # JaxRuntimeError from the bytecode reader
            raise module_verify.ModuleVerifyError(
                f"The exported module's {len(mlir_module_serialized)} bytes are not a readable "
                f"StableHLO portable artifact ({str(e).strip().splitlines()[0][:200]}). "
                f"{module_verify.FIX}") from None
        module_verify.verify_module(module)
        try:
            for check in checks:
                check(module)
            inline_composites_as_calls(module)
        except (RuntimeError, UnicodeError) as e:
            # The bindings raise these reading a corrupt name (e.g. a symbol that is not UTF-8),
            # which MLIR's verifier does not look at.
            raise module_verify.ModuleVerifyError(
                f"The exported module is malformed ({type(e).__name__}: "
                f"{str(e).strip()[:200]}). {module_verify.FIX}") from None
        module_verify.verify_module(module)
        return bytes(jax_extend_mlir.serialize_portable_artifact(module, target))
