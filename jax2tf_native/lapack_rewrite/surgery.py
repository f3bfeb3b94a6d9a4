"""MLIR surgery: replace each LAPACK custom call by a call of a private portable function.

For a call site's operand and result types, the adapter (`adapters`) is exported with
`jax.export` under the portable linear-algebra rules (`linalg_portable.export_scope`); the
export's functions are copied into the module under fresh private names, and the custom call
becomes a `func.call` of the export's `main`. Symbolic (`?`) dimensions of the call are
exported as symbolic dimensions: the copied `main` reads them from its arguments as JAX's own
modules do, and TF's shape refinement specializes it like any function.

`rewrite_module(module)` works in place on a parsed module inside its MLIR context; the public
entry point is `jax2tf_native.lapack_rewrite.rewrite_exported`, which parses and re-serializes.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Collection

import jax
import jax.interpreters.mlir as jax_mlir
import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func as func_dialect

from jax2tf_native import linalg_portable
from jax2tf_native.errors import first_line
from jax2tf_native.lapack_rewrite import adapters
from jax2tf_native.lapack_rewrite.targets import (CallSignature, data_operands,
                                                  parse_tensor_type, signature_of)
from tf_ops import mlir_walk

_PREFIX = "_lapack_portable"
_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class RewriteFailure:
    """A call site left as it was, and why (the custom-call check then rejects it)."""
    target: str
    reason: str


def _parse_type(text: str) -> tuple[list, np.dtype]:
    parsed = parse_tensor_type(text)
    if parsed is None:
        raise adapters.NotRewritableError(f"operand type {text} is not a LAPACK tensor type")
    return parsed


def _operand_specs(sig: CallSignature) -> list[jax.ShapeDtypeStruct]:
    """ShapeDtypeStructs for the operands; each `?` a symbolic dimension (batch dimensions
    shared by position across operands, matrix dimensions named by `core_dim_names`)."""
    parsed = [_parse_type(t) for t in sig.operand_types]
    core = adapters.core_dim_names(sig)
    if len(core) < len(parsed):
        core = core + ((),) * (len(parsed) - len(core))
    names = []
    for (dims, _), core_names in zip(parsed, core):
        batch_rank = len(dims) - len(core_names)
        if batch_rank < 0:
            raise adapters.NotRewritableError(f"operand rank {len(dims)} is below the routine's")
        labels = [f"b{i}" for i in range(batch_rank)] + list(core_names)
        names.append([str(d) if d is not None else label for d, label in zip(dims, labels)])
    if not any(d is None for dims, _ in parsed for d in dims):
        return [jax.ShapeDtypeStruct(tuple(dims), dtype) for dims, dtype in parsed]
    scope = jax.export.SymbolicScope()
    return [jax.ShapeDtypeStruct(jax.export.symbolic_shape(",".join(n) or "", scope=scope)
                                 if n else (), dtype)
            for n, (_, dtype) in zip(names, parsed)]


@functools.lru_cache(maxsize=256)
def _adapter_module_text(sig: CallSignature) -> str:
    """The portable export of `sig`'s adapter, as MLIR text (cached: compile once per shape)."""
    fn = adapters.adapter_for(sig)
    specs = _operand_specs(sig)
    # A float64 call in a module read with x64 off must still be exported as float64.
    wants_x64 = any(np.dtype(s.dtype) in (np.float64, np.complex128, np.int64) for s in specs)
    with jax.enable_x64(wants_x64 or jax.config.jax_enable_x64):
        with linalg_portable.export_scope(platforms=("cpu",)) as extra:
            exported = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(*specs)
    linalg_portable.check_module_portable(exported)
    # Without locations: they would name this package's files, not the user's; the call
    # replacing the custom call keeps the custom call's location.
    with jax_mlir.make_ir_context():
        return ir.Module.parse(exported.mlir_module()).operation.get_asm(
            enable_debug_info=False)


def _fresh_prefix(module: ir.Module) -> str:
    taken = {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
             if "sym_name" in op.attributes}
    k = 0
    while any(name.startswith(f"{_PREFIX}{k}_") for name in taken):
        k += 1
    return f"{_PREFIX}{k}_"


def _splice(module: ir.Module, sig: CallSignature, prefix: str) -> str:
    """Copies the adapter's functions into `module` under `prefix`; returns its main's name."""
    adapter = ir.Module.parse(_adapter_module_text(sig))
    functions = [op for op in adapter.body.operations if op.operation.name == "func.func"]
    renames = {}
    for op in functions:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        renames[old] = f"{prefix}{sig.target}_{old}"
    for old, new in renames.items():
        ir.SymbolTable.replace_all_symbol_uses(old, new, adapter.operation)
    main = None
    for op in functions:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        op.attributes["sym_name"] = ir.StringAttr.get(renames[old])
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        if old == "main":
            main = op
    if main is None:
        raise adapters.NotRewritableError("the adapter's export has no main function")
    function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    got_in = tuple(str(t) for t in function_type.inputs)
    got_out = tuple(str(t) for t in function_type.results)
    if got_in != sig.operand_types or got_out != sig.result_types:
        raise adapters.NotRewritableError(
            f"the portable function has type {got_in} -> {got_out}, the call "
            f"{sig.operand_types} -> {sig.result_types}")
    for op in functions:
        module.body.append(op.operation)  # moves it out of the adapter module
    return renames["main"]


def _lapack_calls(module: ir.Module, keep: Collection[str] = ()
                  ) -> list[tuple[ir.Operation, CallSignature]]:
    """The module's LAPACK calls, but those whose target is in `keep`."""
    return [(found.op.operation, sig) for found in mlir_walk.walk(module.operation)
            if found.target is not None and found.target not in keep
            and (sig := signature_of(found.op.operation)) is not None]


def lapack_targets(module: ir.Module, keep: Collection[str] = ()) -> list[str]:
    """The LAPACK custom-call targets of `module` (not in `keep`), one per call site in
    program order."""
    return [sig.target for _, sig in _lapack_calls(module, keep)]


def has_lapack_calls(module: ir.Module, keep: Collection[str] = ()) -> bool:
    """Whether `module` holds any of the 48 jaxlib LAPACK custom calls (not in `keep`)."""
    return bool(_lapack_calls(module, keep))


def rewrite_module(module: ir.Module, keep: Collection[str] = ()
                   ) -> tuple[list[str], list[RewriteFailure]]:
    """Rewrites every LAPACK custom call of `module` (but targets in `keep`) in place (inside
    its MLIR context).

    Returns:
      (the rewritten targets, one per call site in program order; the sites left unchanged
      with the reason).
    """
    rewritten, failures = [], []
    mains: dict[CallSignature, str] = {}
    prefix = None
    for op, sig in _lapack_calls(module, keep):
        try:
            if sig not in mains:
                prefix = prefix or _fresh_prefix(module)
                with _lock:  # jax.enable_x64 and the lowering caches are process-wide
                    mains[sig] = _splice(module, sig, f"{prefix}{len(mains)}_")
        except Exception as e:  # export errors come in several types; all keep the call
            failures.append(RewriteFailure(sig.target, f"{type(e).__name__}: "
                                                       f"{first_line(e)[:300]}"))
            continue
        with ir.InsertionPoint(op), op.location:
            call = func_dialect.CallOp([r.type for r in op.results],
                                       ir.FlatSymbolRefAttr.get(mains[sig]), data_operands(op))
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()
        rewritten.append(sig.target)
    return rewritten, failures
