"""convert(): eager, tf.function (with and without jit_compile), Variables, numpy, pytrees."""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose


def f_sin(x):
    return jnp.sin(x) * 2.0


@pytest.mark.parametrize("mode", ["eager", "tf.function", "jit_compile"])
def test_runs_in_every_mode(mode, rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    f_tf = jax2tf_native.convert(f_sin)
    if mode != "eager":
        f_tf = tf.function(f_tf, autograph=False, jit_compile=(mode == "jit_compile"))
    assert_tree_allclose(f_tf(tf.constant(x)).numpy(), f_sin(x))


def test_numpy_variable_and_scalar_arguments(rng):
    w = rng.standard_normal((3, 2)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    fun = lambda w, x, s: x @ w * s
    f_tf = jax2tf_native.convert(fun)
    var = tf.Variable(w)
    assert_tree_allclose(f_tf(var, x, 3.0).numpy(), fun(w, x, 3.0))
    var.assign(w * 2)  # The Variable is read at call time, not baked in.
    assert_tree_allclose(f_tf(var, x, 3.0).numpy(), fun(w * 2, x, 3.0))

    class Model(tf.Module):
        def __init__(self):
            self.w = tf.Variable(w)

        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return jax2tf_native.convert(lambda w, x: x @ w, polymorphic_shapes=[None, "b, _"])(
                self.w, x)

    np.testing.assert_allclose(Model()(x).numpy(), x @ w, rtol=1e-6)


Point = collections.namedtuple("Point", ["x", "y"])


@jax.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second

    def tree_flatten(self):
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_pytrees_in_args_kwargs_and_results(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)

    def fun(tup, lst, dct, pt, pair, *, scale):
        total = tup[0] + lst[1] + dct["w"] + pt.x + pair.first
        return {"sum": total * scale, "parts": [pt.y, Point(pair.second, dct["v"])],
                "pair": Pair(total, scale)}

    args = ((a, b), [b, a], {"w": a, "v": b}, Point(a, b), Pair(a, b))
    f_tf = jax2tf_native.convert(fun)
    got = f_tf(*args, scale=np.float32(2.0))
    want = fun(*args, scale=np.float32(2.0))
    assert isinstance(got["parts"][1], Point) and isinstance(got["pair"], Pair)
    assert_tree_allclose(jax.tree.map(lambda t: t.numpy(), got), want)
    # tf.function can return only structures TF knows (not JAX-registered classes like Pair).
    without_pair = lambda *a, **k: {n: v for n, v in f_tf(*a, **k).items() if n != "pair"}
    f_graph = tf.function(without_pair, autograph=False)
    got_graph = f_graph(*args, scale=np.float32(2.0))
    assert_tree_allclose(jax.tree.map(lambda t: t.numpy(), got_graph),
                         {n: v for n, v in want.items() if n != "pair"})


ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
              np.float16, jnp.bfloat16, np.float32, np.complex64]
X64_DTYPES = [np.int64, np.uint64, np.float64, np.complex128]


def _example(dtype, rng):
    values = rng.integers(0, 5, size=(2, 3))
    if np.dtype(dtype).kind == "c":
        return (values + 1j * values).astype(dtype)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_round_trip(dtype, rng):
    x = _example(dtype, rng)
    fun = lambda x: (x, jnp.flip(x, 0), x.shape[0] * jnp.ones((), x.dtype))
    got = tf.function(jax2tf_native.convert(fun), autograph=False)(x)
    assert_tree_allclose([t.numpy() for t in got], list(fun(x)))


@pytest.mark.parametrize("dtype", X64_DTYPES, ids=lambda d: np.dtype(d).name)
def test_64_bit_dtypes_round_trip_with_x64(dtype, rng):
    x = _example(dtype, rng)
    fun = lambda x: (x, x + x)
    with jax.enable_x64(True):
        got = jax2tf_native.convert(fun)(x)
        want = fun(x)
    assert got[0].dtype.as_numpy_dtype == np.dtype(dtype)
    assert_tree_allclose([t.numpy() for t in got], list(want))


@pytest.mark.parametrize("dtype", X64_DTYPES, ids=lambda d: np.dtype(d).name)
def test_64_bit_inputs_without_x64_match_jax2tf(dtype, rng):
    from jax.experimental import jax2tf
    x = _example(dtype, rng)
    fun = lambda x: x * 2
    ours = jax2tf_native.convert(fun)(tf.constant(x))
    peer = jax2tf.convert(fun)(tf.constant(x))
    assert ours.dtype == peer.dtype  # both the 32-bit counterpart
    np.testing.assert_array_equal(ours.numpy(), peer.numpy())


def test_multi_platform_module_runs_on_cpu(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    f_tf = jax2tf_native.convert(f_sin, platforms=("cpu", "cuda", "tpu"),
                                 polymorphic_shapes=["b, ..."])
    assert_tree_allclose(f_tf(x).numpy(), f_sin(x))
    peer_names = jax2tf_native.convert(f_sin, native_serialization_platforms=("cpu", "tpu"))
    assert_tree_allclose(peer_names(x).numpy(), f_sin(x))


def test_unused_arguments_are_dropped_but_accepted(rng):
    x = rng.standard_normal((3,)).astype(np.float32)
    fun = lambda unused, x: x + 1
    assert_tree_allclose(jax2tf_native.convert(fun)(np.zeros(7, np.int32), x).numpy(), fun(None, x))


def test_functools_wraps_metadata():
    def my_model(x):
        """Doc."""
        return x
    assert jax2tf_native.convert(my_model).__name__ == "my_model"
