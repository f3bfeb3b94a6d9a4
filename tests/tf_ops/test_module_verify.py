"""tf_ops.module_verify: MLIR verifier, field and signature checks on exported modules."""
import dataclasses

import jax
import jax.interpreters.mlir as jax_mlir
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import mlir as jax_extend_mlir
from jax.extend.mlir import ir

from tf_ops import module_for_tf, module_verify


def _exported(shape=(3,)):
    return jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct(shape, np.float32))


def test_valid_module_passes_every_check():
    exp = _exported()
    module_verify.check_fields(exp)
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        module_verify.verify_module(module)
        module_verify.check_main_signature(module, exp)


def test_verifier_failure_is_our_error():
    exp = _exported()
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        main = next(op.operation for op in module.body.operations
                    if ir.StringAttr(op.operation.attributes["sym_name"]).value == "main")
        # main's declared type no longer matches its body: MLIR's verifier rejects it.
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([], []))
        with pytest.raises(module_verify.ModuleVerifyError, match="fails MLIR verification.*Fix"):
            module_verify.verify_module(module)


def test_unreadable_bytes_are_our_error():
    with pytest.raises(module_verify.ModuleVerifyError,
                       match=r"7 bytes are not a readable StableHLO portable artifact"):
        module_for_tf.reserialize(b"ML\xefRxyz", "1.13.7")


def test_signature_disagreement_names_both_sides():
    exp = _exported((3,))
    forged = dataclasses.replace(exp, out_avals=(jax.core.ShapedArray((3,), np.int32),))
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        with pytest.raises(module_verify.ModuleVerifyError,
                           match=r"output 0: the artifact declares int32\[3\] but the module's "
                                 r"main has tensor<3xf32>"):
            module_verify.check_main_signature(module, forged)


def test_fields_that_disagree_with_each_other():
    exp = _exported()
    with pytest.raises(module_verify.ModuleVerifyError, match="in_tree has 1 leaves but in_avals "
                                                              "has 2"):
        module_verify.check_fields(dataclasses.replace(exp, in_avals=exp.in_avals * 2))
    with pytest.raises(module_verify.ModuleVerifyError, match="nr_devices is 0"):
        module_verify.check_fields(dataclasses.replace(exp, nr_devices=0))
