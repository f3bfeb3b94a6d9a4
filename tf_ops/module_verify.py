"""Checks a parsed StableHLO module, and the `Exported` fields that describe it, before use.

Serialized artifacts come from elsewhere (a model store, a download). Their bytes may be
corrupt in ways the flatbuffer and the MLIR bytecode readers accept: a module that fails MLIR's
verifier, or fields (`in_avals`, `module_kept_var_idx`, ...) that disagree with the module's
`main`. Unverified IR can make later MLIR passes loop or abort, and disagreeing fields make
TensorFlow fail at run time with raw XLA errors, so both are checked right after parsing,
before anything serializes, compiles or runs the module.

This module imports no TensorFlow, so the artifact sandbox child can use it cheaply.
"""
from __future__ import annotations

from typing import Any

import jax.interpreters.mlir as jax_mlir
import numpy as np
from jax.extend.mlir import ir

from tf_ops import mlir_walk


class ModuleVerifyError(ValueError):
    """The module, or the fields describing it, are malformed. The message says which part."""


FIX = ("Fix: re-export the function (jax.export.export(...)(...).serialize()) and copy the "
        "complete bytes; the artifact is corrupt or was edited.")


def verify_module(module: ir.Module) -> None:
    """Runs MLIR's verifier on `module` (inside its context); raises ModuleVerifyError."""
    try:
        ok = module.operation.verify()
    except Exception as e:  # MLIRError carries the diagnostics
        raise ModuleVerifyError(
            f"The exported module fails MLIR verification: {_first_line(e)}. {FIX}") from None
    if not ok:
        raise ModuleVerifyError(f"The exported module fails MLIR verification. {FIX}")
    _check_shape_assertions(module.operation)


# What JAX writes on a `shape_assertion` custom call. TF's shape refinement rejects any other
# attribute with a raw error at run time, and MLIR's verifier allows them.
_SHAPE_ASSERTION_ATTRIBUTES = {"api_version", "backend_config", "call_target_name",
                               "error_message", "has_side_effect"}


def _check_shape_assertions(op: ir.Operation) -> None:
    for child, _, target in mlir_walk.walk(op):
        if target != "shape_assertion":
            continue
        names = {child.attributes[i].name for i in range(len(child.attributes))}
        operands = [str(o.type) for o in child.operands]
        if (names - _SHAPE_ASSERTION_ATTRIBUTES or "error_message" not in names
                or not operands or operands[0] != "tensor<i1>"):
            raise ModuleVerifyError(
                f"The exported module has a malformed shape_assertion (attributes "
                f"{sorted(names)}, operands {operands}). {FIX}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


def check_fields(exported: Any) -> None:
    """Structural checks of an `Exported`'s fields against each other (no MLIR needed).

    Raises:
      ModuleVerifyError: naming the field and both counts.
    """
    name = getattr(exported, "fun_name", "?")
    n_in, n_out = len(exported.in_avals), len(exported.out_avals)
    if exported.in_tree.num_leaves != n_in:
        raise ModuleVerifyError(
            f"'{name}': in_tree has {exported.in_tree.num_leaves} leaves but in_avals has "
            f"{n_in}. {FIX}")
    if exported.out_tree.num_leaves != n_out:
        raise ModuleVerifyError(
            f"'{name}': out_tree has {exported.out_tree.num_leaves} leaves but out_avals has "
            f"{n_out}. {FIX}")
    children = exported.in_tree.children()
    if (len(children) != 2 or exported.in_tree.node_data() is None
            or exported.in_tree.node_data()[0] is not tuple
            or children[1].node_data() is None or children[1].node_data()[0] is not dict):
        raise ModuleVerifyError(
            f"'{name}': in_tree is {exported.in_tree}, not the (args, kwargs) pair every "
            f"jax.export artifact has. {FIX}")
    kept = list(exported.module_kept_var_idx)
    if kept != sorted(set(kept)) or any(not 0 <= i < n_in for i in kept):
        raise ModuleVerifyError(
            f"'{name}': module_kept_var_idx {tuple(kept)} is not an increasing list of input "
            f"positions below {n_in}. {FIX}")
    for field, count in (("in_shardings_hlo", n_in), ("out_shardings_hlo", n_out)):
        value = getattr(exported, field, None)
        if value is not None and len(value) != count:
            raise ModuleVerifyError(f"'{name}': {field} has {len(value)} entries for {count} "
                                    f"arrays. {FIX}")
    if exported.nr_devices < 1:
        raise ModuleVerifyError(f"'{name}': nr_devices is {exported.nr_devices}. {FIX}")
    if not exported.platforms or not all(isinstance(p, str) and p for p in exported.platforms):
        raise ModuleVerifyError(f"'{name}': platforms {exported.platforms!r} is empty or "
                                f"malformed. {FIX}")
    for kind, avals in (("input", exported.in_avals), ("output", exported.out_avals)):
        for i, aval in enumerate(avals):
            for d in aval.shape:
                if isinstance(d, (int, np.integer)) and d < 0:
                    raise ModuleVerifyError(f"'{name}': {kind} {i} has negative dimension {d} "
                                            f"in shape {aval.shape}. {FIX}")


def _main_function(module: ir.Module):
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and "sym_name" in op.attributes and \
                ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise ModuleVerifyError(f"The exported module has no 'main' function. {FIX}")


def _check_type(where: str, mlir_type: ir.Type, aval) -> None:
    try:
        tensor = ir.RankedTensorType(mlir_type)
    except Exception:
        raise ModuleVerifyError(f"{where}: the module's main has type {mlir_type}, not a ranked "
                                f"tensor for {aval.str_short()}. {FIX}") from None
    expected = jax_mlir.dtype_to_ir_type(np.dtype(aval.dtype))
    if str(tensor.element_type) != str(expected) or tensor.rank != len(aval.shape):
        raise ModuleVerifyError(f"{where}: the artifact declares {aval.str_short()} but the "
                                f"module's main has {mlir_type}. {FIX}")
    for axis, d in enumerate(aval.shape):
        static = isinstance(d, (int, np.integer))
        # A dynamic dimension where the artifact declares a static size is refined to it (as
        # XlaCallModule does; jax2tf_native.declared_shapes before the module is prepared).
        if (not static and not tensor.is_dynamic_dim(axis)) or (
                static and not tensor.is_dynamic_dim(axis) and tensor.shape[axis] != d):
            raise ModuleVerifyError(f"{where}: the artifact declares {aval.str_short()} but the "
                                    f"module's main has {mlir_type} (dimension {axis}). {FIX}")


def check_main_signature(module: ir.Module, exported: Any) -> None:
    """`main`'s argument and result types agree with the artifact's kept inputs and outputs.

    Must run inside the module's MLIR context.
    """
    main = _main_function(module)
    fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    prefix = (1 if len(exported.platforms) > 1 else 0) + len(exported.ordered_effects)
    kept = list(exported.module_kept_var_idx)
    inputs, results = list(fn_type.inputs), list(fn_type.results)
    name = getattr(exported, "fun_name", "?")
    if len(inputs) != prefix + len(kept):
        raise ModuleVerifyError(
            f"'{name}': the module's main takes {len(inputs)} arguments, but the artifact "
            f"declares {len(kept)} kept inputs (plus {prefix} platform/token arguments). {FIX}")
    n_tokens = len(exported.ordered_effects)
    if len(results) != n_tokens + len(exported.out_avals):
        raise ModuleVerifyError(
            f"'{name}': the module's main returns {len(results)} results, but the artifact "
            f"declares {len(exported.out_avals)} outputs. {FIX}")
    for pos, i in enumerate(kept):
        _check_type(f"'{name}' input {i}", inputs[prefix + pos], exported.in_avals[i])
    for i, aval in enumerate(exported.out_avals):
        _check_type(f"'{name}' output {i}", results[n_tokens + i], aval)

