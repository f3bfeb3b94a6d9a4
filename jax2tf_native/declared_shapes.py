"""Refines an artifact whose module `main` has dynamic dimensions where the artifact declares
static ones, to the declared shapes.

JAX's own back-compat data has such modules (`stablehlo_dynamic_top_k`, `..._approx_top_k`,
`..._rng_bit_generator`: `main(%arg0: tensor<4x?xf32>)`, recorded with static inputs), and TF's
XlaCallModule runs them, refining shapes from its static inputs. We do the same refinement once,
before the module is checked and prepared: `main`'s dynamic input dimensions take the declared
sizes and StableHLO's shape refinement (`jax.extend.mlir.refine_polymorphic_shapes`) carries
them through the module, which must then be static throughout. The artifact's other fields are
kept; a module that needs none of this is returned as the same object.
"""
from __future__ import annotations

import jax
import numpy as np
import jax.interpreters.mlir as jax_mlir
from jax.extend import mlir as jax_extend_mlir
from jax.interpreters.mlir import ir

from jax2tf_native import _jax_internals
from jax2tf_native.errors import ExportedModuleError, first_line
from tf_ops import module_for_tf, versions


def _main(module: ir.Module):
    for op in module.body.operations:
        op = op.operation
        if (op.name == "func.func" and "sym_name" in op.attributes
                and ir.StringAttr(op.attributes["sym_name"]).value == "main"):
            return op
    return None


def _declared_types(main, exported: jax.export.Exported) -> list | None:
    """`main`'s input types with the declared static sizes in its dynamic dimensions; None when
    nothing changes or the declared avals are not all static there (symbolic artifacts)."""
    fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    inputs = list(fn_type.inputs)
    prefix = (1 if len(exported.platforms) > 1 else 0) + len(exported.ordered_effects)
    if len(inputs) != prefix + len(exported.module_kept_var_idx):
        return None  # module_verify names this mismatch
    changed = False
    for pos, i in enumerate(exported.module_kept_var_idx):
        aval = exported.in_avals[i]
        try:
            tensor = ir.RankedTensorType(inputs[prefix + pos])
        except ValueError:
            return None
        if tensor.rank != len(aval.shape):
            return None
        shape = []
        for axis, d in enumerate(aval.shape):
            if not isinstance(d, int):
                return None  # a symbolic artifact: its dynamic dimensions stay
            if tensor.is_dynamic_dim(axis):
                changed = True
            shape.append(d)
        inputs[prefix + pos] = ir.RankedTensorType.get(shape, tensor.element_type,
                                                       tensor.encoding)
    return inputs if changed else None


def _wrap_refined(block, argument, static_type) -> None:
    """Gives `argument` its static type, its uses the old (dynamic) type through StableHLO's
    `shape_refinement_operand_wrapper`, which shape refinement resolves (as StableHLO's
    refine-arguments pass does, which XlaCallModule runs): `main` may pass the argument on to
    functions that take the dynamic type."""
    dynamic_type = argument.type
    shape = np.asarray(ir.RankedTensorType(static_type).shape, np.int64)
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(block):
        shape_type = ir.RankedTensorType.get(shape.shape, i64)
        constant = ir.Operation.create(
            "stablehlo.constant", results=[shape_type],
            attributes={"value": ir.DenseElementsAttr.get(shape, type=shape_type)})
        wrapper = ir.Operation.create(
            "stablehlo.custom_call", results=[dynamic_type],
            operands=[argument, constant.result],
            attributes={
                "call_target_name": ir.StringAttr.get("stablehlo.shape_refinement_operand_wrapper"),
                "indices_of_shape_operands": ir.DenseElementsAttr.get(
                    np.asarray([1], np.int64), type=ir.RankedTensorType.get([1], i64)),
            })
    argument.replace_all_uses_with(wrapper.result)
    wrapper.operands[0] = argument
    argument.set_type(static_type)


def refined_to_declared_shapes(exported: jax.export.Exported) -> jax.export.Exported:
    """`exported` whose module's `main` takes the declared static shapes where it had dynamic
    dimensions, refined through the module; `exported` itself when there are none.

    Its VJP (`exported.vjp()`) is refined the same way when asked for.

    Example:
        >>> import numpy as np
        >>> b, = jax.export.symbolic_shape("b")
        >>> exp = jax.export.export(jax.jit(lambda x: x * 2))(jax.ShapeDtypeStruct((b,), np.float32))
        >>> refined_to_declared_shapes(exp) is exp   # declared symbolic: nothing to refine
        True
    """
    if not all(isinstance(d, int) for a in exported.in_avals for d in a.shape):
        return exported
    with jax_mlir.make_ir_context() as context, ir.Location.unknown():
        context.emit_error_diagnostics = False
        try:
            module = jax_extend_mlir.deserialize_portable_artifact(
                exported.mlir_module_serialized)
        except Exception:  # unreadable bytes: left to module_for_tf, which names the fix
            return exported
        main = _main(module)
        inputs = None if main is None else _declared_types(main, exported)
        if inputs is None:
            return exported
        fn_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(inputs, list(fn_type.results)))
        block = main.regions[0].blocks[0]
        for argument, new_type in zip(block.arguments, inputs):
            if argument.type != new_type:
                _wrap_refined(block, argument, new_type)
        shardy = module_for_tf.uses_shardy(module)
        try:
            refined = jax_extend_mlir.refine_polymorphic_shapes(
                jax_mlir.module_to_bytecode(module), enable_shape_assertions=True,
                validate_static_shapes=True, enable_shardy=shardy)
        except Exception as e:  # noqa: BLE001 -- MLIR's diagnostics, summarized
            declared = ", ".join(a.str_short() for a in exported.in_avals)
            raise ExportedModuleError(
                f"'{exported.fun_name}': its module's main has dynamic dimensions where the "
                f"artifact declares static inputs ({declared}), and refining the module to "
                f"those shapes failed ({type(e).__name__}: {first_line(e)[:300]}). Fix: "
                f"export it again with these static shapes, or with symbolic shapes declared "
                f"(jax.export.symbolic_args_specs).") from None
        blob = bytes(jax_extend_mlir.serialize_portable_artifact(
            ir.Module.parse(refined), versions.tf_stablehlo_version(), shardy))
    return _jax_internals.exported_with_module(exported, blob, refined_to_declared_shapes)
