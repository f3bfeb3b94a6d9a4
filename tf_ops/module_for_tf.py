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

import re
import threading

import jax.interpreters.mlir as jax_mlir
from jax.extend import mlir as jax_extend_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func as func_dialect

from tf_ops import known_downgrades, mlir_walk, module_verify, source_lines

ModuleCheck = Callable[[ir.Module], None]


def _composite_ops(module: ir.Module) -> list[ir.Operation]:
    return [found.op for found in mlir_walk.walk(module.operation)
            if found.op.name == "stablehlo.composite"]


def _op_summaries(module: ir.Module):
    """(name, attribute names, element types of operands/results, source "file:line", the op)
    per op."""
    def element_type(t: ir.Type) -> str:
        element = getattr(t, "element_type", None)  # MLIR's Python API downcasts shaped types
        return str(element) if element is not None else str(t)

    for op, _, _ in mlir_walk.walk(module.operation):
        types = ({element_type(v.type) for v in op.operands}
                 | {element_type(v.type) for v in op.results})
        names = {op.attributes[i].name for i in range(len(op.attributes))}
        yield op.name, names, types, source_lines.user_line(str(op.location)), op


def inline_composites_as_calls(module: ir.Module) -> int:
    """Replaces every `stablehlo.composite` by a `func.call` of its decomposition.

    Returns the number of composites replaced. Must run inside the module's MLIR context.
    """
    return _replace_by_calls(_composite_ops(module))


def _replace_by_calls(composites: list[ir.Operation]) -> int:
    """Replaces each composite op by a `func.call` of its decomposition."""
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


def uses_shardy(module: ir.Module) -> bool:
    """Whether the module holds Shardy ops (`sdy.mesh`, `sdy.sharding_constraint`, ...)."""
    return any(op.name.startswith("sdy.") for op, _, _ in mlir_walk.walk(module.operation))


def module_bytes_for_tf(mlir_module_serialized: bytes, *,
                        stablehlo_version: str | None = None,
                        checks: Sequence[ModuleCheck] = (),
                        target_tf: str | None = None, written_here: bool = False) -> bytes:
    """Returns the module re-serialized for a TF that reads `stablehlo_version`.

    Args:
      mlir_module_serialized: `Exported.mlir_module_serialized` (a StableHLO portable artifact).
      stablehlo_version: the consumer's StableHLO version, e.g. "1.13.7"; None for the installed
        TF's. Must be between TF's minimum and current version.
      checks: callables run on the parsed module before it is written (e.g. the custom-call
        allowlist); they raise to reject the module.
      target_tf: the TF version `stablehlo_version` was chosen for, named in errors.
      written_here: the bytes come from `jax.export` in this process. Only then may they be
        handed to TF with just the header's version changed (`known_downgrades`); bytes read
        from elsewhere are always written anew, so TF parses only what our writer produced.

    Raises:
      tf_targets.TargetTfError: the module holds an op, attribute or type that
        `stablehlo_version` lacks (the message names it, its source line, and the oldest TF
        of the measured table that reads it).

    Example:
        >>> import jax
        >>> exp = jax.export.export(jax.jit(jax.lax.erf))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> "stablehlo.composite" in exp.mlir_module()
        True
        >>> blob = module_bytes_for_tf(exp.mlir_module_serialized)
        >>> blob[:4]   # a portable artifact (MLIR bytecode), composites inlined as calls
        b'ML\xefR'
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
    return reserialize(mlir_module_serialized, target, checks=checks, target_tf=target_tf,
                       written_here=written_here)


# A new MLIR context with JAX's dialects costs ~4-10 ms (measured), a fifth of an MLP's whole
# export; each conversion used to create one here (issue 15, conversion time). Each thread
# reuses one for this many modules; then a new one, since a context keeps every type and
# attribute it ever uniqued (unique constants and locations would grow it without bound).
_CONTEXT_USES = 64
_contexts = threading.local()


def _reused_context() -> ir.Context:
    """This thread's MLIR context for `reserialize`, renewed every `_CONTEXT_USES` modules."""
    uses = getattr(_contexts, "uses", _CONTEXT_USES)
    if uses >= _CONTEXT_USES:
        _contexts.context, uses = jax_mlir.make_ir_context(), 0
    _contexts.uses = uses + 1
    return _contexts.context


def reserialize(mlir_module_serialized: bytes, target: str, *,
                checks: Sequence[ModuleCheck] = (), target_tf: str | None = None,
                written_here: bool = False) -> bytes:
    """Parses, verifies, checks, inlines composites and writes the module at `target`.

    Unverified IR is never handed to a pass or the serializer: a corrupt module that the
    bytecode reader accepts can make them loop or abort.

    Raises:
      module_verify.ModuleVerifyError: the bytes do not parse, or the module fails MLIR's
        verifier (a ValueError).
    """
    with _reused_context() as context:
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
        kind = None
        with mlir_walk.reusing_walks(module.operation):
            module_verify.verify_module(module)
            try:
                for check in checks:
                    check(module)
                composites = _composite_ops(module)
                if written_here and target_tf is None and not composites:
                    # Nothing below rewrites the module: the write may be known to change
                    # only the header (see known_downgrades).
                    kind = known_downgrades.module_kind(mlir_walk.walk(module.operation))
                    known = known_downgrades.header_only(mlir_module_serialized, target, kind)
                    if known is not None:
                        return known
                _replace_by_calls(composites)  # changes the module: walks end here
            except (RuntimeError, UnicodeError) as e:
                # The bindings raise these reading a corrupt name (e.g. a symbol that is not
                # UTF-8), which MLIR's verifier does not look at.
                raise module_verify.ModuleVerifyError(
                    f"The exported module is malformed ({type(e).__name__}: "
                    f"{str(e).strip()[:200]}). {module_verify.FIX}") from None
        # Verified once, above: the checks only read the module, and replacing a verified
        # composite (whose verifier checked its decomposition's type) by a call of that
        # decomposition keeps it valid; so does a target's feature rewrite (its ops keep their
        # result types; tests/jax2tf_native/test_target_tf_rewrites.py verifies what it writes).
        if target_tf is not None:
            from tf_ops import tf_targets  # imports TF; the sandbox child passes no target
            tf_targets.adapt_module(module, tf_targets.resolve(target_tf), _op_summaries)
        try:
            # Written "mixed", as jax.export writes every module: Shardy ops stay Shardy
            # (serialized plainly they become frontend attributes that TF turns back into
            # custom calls its shape refinement cannot refine: polymorphic sharded modules
            # fail, measured), and a module without them gets the bytes JAX wrote, up to the
            # header's version, which known_downgrades relies on.
            written = bytes(jax_extend_mlir.serialize_portable_artifact(module, target, True))
            if kind is not None:
                known_downgrades.record(mlir_module_serialized, target, kind, written)
            return written
        except Exception as e:  # jaxlib raises its own error types for an illegal op
            error = _too_new_error(module, str(e), target, target_tf)
        raise error from None


_ILLEGAL_OP_RE = re.compile(r"(?:(\S+:\d+:\d+): )?error: failed to legalize operation "
                            r"'vhlo\.(\w+)_v(\d+)'[^:]*: (.*)")
# Element types every StableHLO version has; the others in an illegal op are the likely cause.
_OLD_TYPES = {"f16", "f32", "f64", "bf16", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16",
              "ui32", "ui64", "tensor", "complex", "token", "tuple", "index", "none"}


def _too_new_error(module: ir.Module, message: str, version: str,
                   target_tf: str | None) -> Exception:
    """A TargetTfError naming what `version` cannot express, or the error as it came."""
    from tf_ops import tf_targets, versions  # TF: only reached when writing for a target fails
    match = _ILLEGAL_OP_RE.search(message)
    if match is None:
        return ValueError(f"JAX could not write the module for StableHLO {version}: "
                          f"{message.strip().splitlines()[0][:300]}")
    where, op, form, printed = match.groups()
    types = sorted({t for t in re.findall(r"!vhlo\.(\w+?)_v\d+", printed)} - _OLD_TYPES)
    attributes = re.findall(r"(\w+) = #vhlo\.", printed)
    what = f"stablehlo.{op}" + (f" (its version-{form} form)" if int(form) > 1 else "")
    if types:
        what += f" with type {', '.join(types)}"
    elif int(form) > 1 and attributes:
        what += f" with attributes {', '.join(sorted(set(attributes))[:6])}"

    def writes(candidate: str) -> bool:
        if versions.parse_stablehlo_version(candidate) <= versions.parse_stablehlo_version(version):
            return False
        try:
            jax_extend_mlir.serialize_portable_artifact(module, candidate)
            return True
        except Exception:  # the same refusal at this version too
            return False

    oldest = tf_targets.oldest_reading(writes)
    readers = [target_tf] if target_tf else tf_targets.targets_reading(version)
    consumer = (f"TF {' / '.join(readers)} (StableHLO {version})" if readers
                else f"StableHLO {version}")
    fix = (f"Fix: target_tf='{oldest.version}' or newer (the oldest TF whose StableHLO version "
           f"can express it; the serving TF must be at least that), or avoid that op/type in "
           f"the exported function." if oldest
           else "Fix: avoid that op/type; no measured TF version reads it.")
    return tf_targets.TargetTfError(
        f"The module uses {what}{f' at {where}' if where else ''}, which {consumer} cannot "
        f"read, so it cannot be written for that TF. {fix}")
