"""`tf_variables`: Variables that share a jax.Array's buffer without ever changing it, leaves
loaded by a function, and JAX views of the Variables (issue 30: one copy of the parameters)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from jax2tf_native import tf_variables
from jax2tf_native.errors import ArgumentTypeError


def _pointer(variable: tf.Variable) -> int:
    return np.asarray(variable.read_value()).ctypes.data


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32])
def test_variable_shares_a_cpu_jax_array_and_copies_on_write(dtype):
    array = (jnp.arange(12).reshape(3, 4) % 5).astype(dtype)
    _, [variable] = tf_variables.to_variables({"w": array})
    # Pins TF's handling of a jax.Array given to tf.Variable: its buffer is shared (no copy
    # of the parameters) ...
    assert _pointer(variable) == array.unsafe_buffer_pointer()
    before = np.asarray(array).copy()

    @tf.function
    def step():
        variable.assign_add(tf.ones_like(variable))

    step()
    variable.assign_sub(2 * tf.ones_like(variable))
    # ... and TF copies it on the Variable's first write: the JAX array never changes.
    np.testing.assert_array_equal(np.asarray(array), before)
    np.testing.assert_array_equal(variable.numpy(), (before.astype(np.float32) - 1).astype(
        before.dtype))


def test_leaves_may_be_functions_called_once_each_in_key_order():
    calls = []

    def load(name, value):
        def loader():
            calls.append(name)
            return value
        return loader

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    steps = np.array([3, 4], np.int32)
    tree, flat = tf_variables.to_variables({"w": load("w", w), "steps": load("steps", steps)})
    assert calls == ["steps", "w"]
    np.testing.assert_array_equal(tree["w"].numpy(), w)
    np.testing.assert_array_equal(tree["steps"].numpy(), steps)
    assert [(v.name, v.trainable) for v in flat] == [("params/steps:0", False),
                                                     ("params/w:0", True)]


def test_a_leaf_function_returning_no_array_is_named():
    with pytest.raises(ArgumentTypeError, match=r"params leaf params/w cannot "):
        tf_variables.to_variables({"w": lambda: "not an array"})


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.bool_])
def test_jax_views_share_the_variables_buffers(dtype):
    value = (np.arange(8) % 3).astype(dtype).reshape(2, 4)
    variable = tf.Variable(value)
    view = tf_variables.jax_views({"v": variable})["v"]
    assert view.dtype == value.dtype
    assert view.unsafe_buffer_pointer() == _pointer(variable)
    np.testing.assert_array_equal(np.asarray(view), value)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a)(view)), value)


def test_jax_views_copy_what_jax_would_convert():
    variable = tf.Variable(np.array([1, 2**40], np.int64))
    view = tf_variables.jax_views(variable)
    # Without x64 JAX holds int32, as jax.device_put(numpy int64) gives.
    assert view.dtype == jax.device_put(np.zeros(1, np.int64)).dtype
    np.testing.assert_array_equal(np.asarray(view)[:1], [1])
