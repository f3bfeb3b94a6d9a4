"""Every bad input ends in an error naming the argument path, the dimension, expected vs got,
and the fix; never an IndexError or an MLIR dump."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native import errors

add = lambda x, y: jnp.sin(x) + y
f32 = lambda *shape: np.ones(shape, np.float32)


def test_rank_mismatch_names_path_and_ranks():
    f_tf = jax2tf_native.convert(add, polymorphic_shapes=["(b, 3)", "(b, 3)"])
    f_tf(f32(2, 3), f32(2, 3))
    with pytest.raises(errors.PolymorphicShapeError,
                       match=r"'\(b, 3\)' for args\[1\] has 2 dimension.*rank 1 .* '\(b\)'"):
        f_tf(f32(2, 3), f32(3))


def test_constant_dimension_mismatch_after_conversion():
    f_graph = tf.function(jax2tf_native.convert(add, polymorphic_shapes=["(b, 3)", "(b, 3)"]),
                          autograph=False)
    with pytest.raises(errors.PolymorphicShapeError,
                       match=r"args\[0\] \(actual shape \(2, 4\)\) is invalid: syntax error in "
                             r"symbolic shape '\(b, 3\)' in dimension 1: different size 3 for "
                             r"known dimension\. Fix"):
        f_graph(f32(2, 4), f32(2, 4))


def test_call_exported_constant_dimension_and_dtype():
    exp = jax.export.export(jax.jit(add))(f32(2, 3), f32(2, 3))
    f_tf = jax2tf_native.call_exported(exp)
    with pytest.raises(errors.ArgumentShapeError,
                       match=r"args\[1\]\.shape\[1\] is 4, but .* for 3 .*Fix"):
        f_tf(f32(2, 3), f32(2, 4))
    with pytest.raises(errors.ArgumentTypeError,
                       match=r"args\[0\] has dtype int32, .* float32. Fix: pass float32"):
        f_tf(np.ones((2, 3), np.int32), f32(2, 3))
    with pytest.raises(errors.ArgumentShapeError, match=r"args\[0\] has rank 1 .* rank 2"):
        f_tf(f32(3), f32(2, 3))


def test_shared_variable_conflict_eager():
    f_tf = jax2tf_native.convert(add, polymorphic_shapes=["n", "n"])
    with pytest.raises(errors.ArgumentShapeError,
                       match=r"args\[1\]\.shape\[0\] = 4.*`n` = 3 from args\[0\]\.shape\[0\]"):
        f_tf(f32(3), f32(4))


def test_shared_variable_conflict_in_tf_function_names_the_variable():
    f_graph = tf.function(jax2tf_native.convert(add, polymorphic_shapes=["n", "n"]),
                          autograph=False, input_signature=[tf.TensorSpec([None], tf.float32)] * 2)
    np.testing.assert_allclose(f_graph(f32(3), f32(3)).numpy(), np.sin(1) + 1, rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        f_graph(f32(3), f32(4))
    message = info.value.message
    assert "variable `n` = " in message and "args[1].shape[0] =] [4] [n =] [3]" in message
    assert "stablehlo" not in message


def test_variable_below_one_in_tf_function():
    fun = lambda x: x[1:] * 2
    f_graph = tf.function(jax2tf_native.convert(fun, polymorphic_shapes=["b + 1"]),
                          autograph=False, input_signature=[tf.TensorSpec([None], tf.float32)])
    np.testing.assert_allclose(f_graph(f32(3)).numpy(), [2, 2])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`b` must be >= 1.*\[args\[0\]\.shape\[0\] =\] \[1\] \[b =\] \[0\]"):
        f_graph(f32(1))
    with pytest.raises(errors.ArgumentShapeError, match=r"`b` must be >= 1.*b = 0"):
        jax2tf_native.convert(fun, polymorphic_shapes=["b + 1"])(f32(1))


def test_constraint_violation():
    f_tf = jax2tf_native.convert(lambda x: x * 2, polymorphic_shapes=["b"],
                                 polymorphic_constraints=["b >= 4"])
    np.testing.assert_allclose(f_tf(f32(4)).numpy(), 2 * f32(4))
    with pytest.raises(errors.ArgumentShapeError, match=r"constraint `b >= 4` \(b = 2\)"):
        f_tf(f32(2))


def test_expression_that_cannot_hold():
    f_tf = jax2tf_native.convert(lambda x: x * 2, polymorphic_shapes=["2*b"])
    with pytest.raises(errors.ArgumentShapeError, match=r"args\[0\]\.shape\[0\] = 5 cannot equal 2\*b"):
        f_tf(f32(5))


@pytest.mark.parametrize("spec, pattern", [
    ("(b, ", r"polymorphic shape '\(b, ' for args\[0\] .* is invalid"),
    ("b, c, d", r"has 3 dimension\(s\), but args\[0\] has rank 2"),
    ("(b, 4)", r"different size 4 for known dimension"),
    ("b // 2, ...", r"is invalid"),
])
def test_malformed_polymorphic_shapes(spec, pattern):
    with pytest.raises(errors.PolymorphicShapeError, match=pattern) as info:
        jax2tf_native.convert(lambda x: x, polymorphic_shapes=[spec])(f32(2, 3))
    assert "Fix:" in str(info.value)


def test_polymorphic_shapes_pytree_mismatch():
    f_tf = jax2tf_native.convert(add, polymorphic_shapes=["b", "b", "b"])
    with pytest.raises(errors.PolymorphicShapeError,
                       match=r"does not match the positional arguments.*2 positional"):
        f_tf(f32(2), f32(2))
    with pytest.raises(errors.PolymorphicShapeError, match="must be None or shape strings"):
        jax2tf_native.convert(add, polymorphic_shapes=[3, None])(f32(2), f32(2))


def test_unknown_dimension_without_spec_in_tf_function():
    f_graph = tf.function(jax2tf_native.convert(lambda x: x), autograph=False,
                          input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    with pytest.raises(errors.PolymorphicShapeError,
                       match=r"args\[0\] has dimension 0 unknown .* '\(b, _\)'"):
        f_graph.get_concrete_function()


def test_non_array_arguments():
    f_tf = jax2tf_native.convert(add)
    with pytest.raises(errors.ArgumentTypeError, match=r"args\[1\] is str"):
        f_tf(f32(2), "hello")
    with pytest.raises(errors.ArgumentTypeError, match=r"kwargs\['y'\]\['z'\] is object"):
        jax2tf_native.convert(lambda x, y: x)(f32(2), y={"z": object()})
    with pytest.raises(errors.ArgumentTypeError, match=r"args\[0\]: TF dtype string"):
        f_tf(tf.constant(["a"]), f32(1))


def test_bad_options():
    with pytest.raises(TypeError, match="callable"):
        jax2tf_native.convert(42)
    with pytest.raises(ValueError, match=r"subset of \('cpu', 'cuda', 'rocm', 'tpu'\).*'gpux'"):
        jax2tf_native.convert(add, platforms=["gpux"])
    with pytest.raises(TypeError, match="DisabledSafetyCheck"):
        jax2tf_native.convert(add, disabled_checks=["platform"])
    with pytest.raises(errors.PolymorphicShapeError, match="polymorphic_constraints"):
        jax2tf_native.convert(add, polymorphic_constraints=["b >>= 3"])
    with pytest.raises(ValueError, match="stablehlo_version must look like"):
        jax2tf_native.convert(jnp.sin, stablehlo_version="latest")(f32(2))


def test_platform_mismatch_names_both_sides():
    f_tf = jax2tf_native.convert(jnp.sin, platforms=("tpu",))
    with pytest.raises(errors.ExportedModuleError,
                       match=r"exported for platforms \('tpu',\).*only a CPU device.*'cpu'"):
        f_tf(f32(2))
    # Disabling the platform check is the documented escape hatch; then XLA runs it on CPU.
    disabled = jax2tf_native.convert(jnp.sin, platforms=("tpu",),
                                     disabled_checks=[jax.export.DisabledSafetyCheck.platform()])
    np.testing.assert_allclose(disabled(f32(2)).numpy(), np.sin(f32(2)), rtol=1e-6)


def test_calling_convention_the_installed_tf_cannot_run(monkeypatch):
    from tf_ops import versions
    exp = jax.export.export(jax.jit(jnp.sin))(f32(2))
    monkeypatch.setattr(versions, "tf_maximum_calling_convention_version",
                        lambda: exp.calling_convention_version - 1)
    with pytest.raises(errors.ExportedModuleError,
                       match=rf"calling-convention version {exp.calling_convention_version}, but "
                             rf"the installed TensorFlow runs versions 4\.\."
                             rf"{exp.calling_convention_version - 1}"):
        jax2tf_native.call_exported(exp)


def test_corrupt_serialized_bytes():
    blob = jax.export.export(jax.jit(jnp.sin))(f32(2)).serialize()
    with pytest.raises(errors.ExportedModuleError, match="truncated, corrupt"):
        jax2tf_native.call_exported(bytes(blob[: len(blob) // 2]))
    with pytest.raises(TypeError, match="jax.export.Exported or the bytes"):
        jax2tf_native.call_exported("not bytes")
