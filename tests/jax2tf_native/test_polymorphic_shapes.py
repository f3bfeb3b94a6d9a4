"""Polymorphic shapes: every form symbolic_args_specs accepts, one export for every batch size."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose


@pytest.mark.parametrize("spec, shapes", [
    ("b, ...", [(1, 3), (5, 3), (64, 3)]),
    ("(b, 28, 28, 1)", [(1, 28, 28, 1), (3, 28, 28, 1)]),
    ("(_, b)", [(2, 1), (2, 9)]),
    ("(b, _)", [(4, 3), (6, 3)]),
])
def test_one_export_serves_every_size(spec, shapes, rng):
    fun = lambda x: jnp.tanh(x) + jnp.sum(x, axis=0, keepdims=True)
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=[spec])
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        assert_tree_allclose(f_tf(x).numpy(), fun(x), rtol=1e-5, atol=1e-5)
    assert f_tf.cache_info["exports"] == 1


@pytest.mark.parametrize("spec, make_args", [
    ("(2*b,)", lambda b: np.arange(2 * b, dtype=np.float32)),
    ("(b + 1,)", lambda b: np.arange(b + 1, dtype=np.float32)),
])
def test_dimension_expressions(spec, make_args):
    fun = lambda x: jnp.cumsum(x) * x.shape[0]
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=[spec])
    f_graph = tf.function(f_tf, autograph=False,
                          input_signature=[tf.TensorSpec([None], tf.float32)])
    for b in (1, 4, 9):
        x = make_args(b)
        assert_tree_allclose(f_tf(x).numpy(), fun(x))
        assert_tree_allclose(f_graph(x).numpy(), fun(x))
    assert f_tf.cache_info["exports"] == 1


def test_shared_dimension_variable_and_constraints(rng):
    fun = lambda x, y: x @ y
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=["(b, n)", "(n, 4)"],
                                 polymorphic_constraints=["b >= 2"])
    sig = jax2tf_native.input_signature(
        [np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32)], ["(b, n)", "(n, 4)"])
    assert [s.shape.as_list() for s in sig] == [[None, None], [None, 4]]
    f_graph = tf.function(f_tf, autograph=False, input_signature=sig)
    for b, n in [(2, 3), (5, 7)]:
        x = rng.standard_normal((b, n)).astype(np.float32)
        y = rng.standard_normal((n, 4)).astype(np.float32)
        assert_tree_allclose(f_tf(x, y).numpy(), fun(x, y), rtol=1e-5, atol=1e-5)
        assert_tree_allclose(f_graph(x, y).numpy(), fun(x, y), rtol=1e-5, atol=1e-5)


def test_pytree_prefix_specs(rng):
    fun = lambda params, x: x @ params["w"] + params["b"]
    params = {"w": rng.standard_normal((3, 2)).astype(np.float32),
              "b": rng.standard_normal((2,)).astype(np.float32)}
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=[None, "(b, 3)"])
    single = jax2tf_native.convert(lambda d: d["a"] + d["c"], polymorphic_shapes="b, ...")
    for batch in (1, 6):
        x = rng.standard_normal((batch, 3)).astype(np.float32)
        assert_tree_allclose(f_tf(params, x).numpy(), fun(params, x), rtol=1e-5, atol=1e-5)
        assert_tree_allclose(single({"a": x, "c": x}).numpy(), x + x)
    # A prefix covering a whole dict with one string.
    dict_prefix = jax2tf_native.convert(lambda d: d["a"] * d["c"], polymorphic_shapes=["b, 3"])
    x = rng.standard_normal((4, 3)).astype(np.float32)
    assert_tree_allclose(dict_prefix({"a": x, "c": x}).numpy(), x * x)


def test_input_signature_pytrees_and_scalars():
    args = [{"w": np.zeros((3, 2), np.float32)}, np.zeros((8, 3), np.int32), np.float32(1)]
    sig = jax2tf_native.input_signature(args, [None, "(b, _)", None])
    assert sig[0]["w"] == tf.TensorSpec([3, 2], tf.float32)
    assert sig[1] == tf.TensorSpec([None, 3], tf.int32)
    assert sig[2] == tf.TensorSpec([], tf.float32)
    struct = jax.ShapeDtypeStruct((5, 4), np.float16)
    assert jax2tf_native.input_signature([struct], ["(b, 4)"])[0] == tf.TensorSpec([None, 4],
                                                                                  tf.float16)


def test_graph_with_symbolic_batch_and_static_rest(rng):
    fun = lambda x: jnp.max(x, axis=(1, 2, 3))
    sig = jax2tf_native.input_signature([np.zeros((1, 28, 28, 1), np.float32)], ["(b, 28, 28, 1)"])
    f_graph = tf.function(jax2tf_native.convert(fun, polymorphic_shapes=["(b, 28, 28, 1)"]),
                          autograph=False, input_signature=sig, jit_compile=True)
    for batch in (1, 3, 17):
        x = rng.standard_normal((batch, 28, 28, 1)).astype(np.float32)
        assert_tree_allclose(f_graph(x).numpy(), fun(x))


def test_graph_outputs_get_static_sizes_when_the_inputs_have_them():
    """With a static batch in the graph, output dimensions written in the batch variable are
    static too (as jax.eval_shape gives them), where TF's XlaCallModule says None (so does the
    peer's: checked); with a None batch they stay None."""
    import jax
    from jax.experimental import jax2tf

    def f(x, y):
        return jnp.concatenate([jnp.sin(x), x], axis=0), x[:, :1] * y, jnp.sum(x)

    specs = [tf.TensorSpec([4, 3]), tf.TensorSpec([1, 1])]
    want = jax.eval_shape(f, jax.ShapeDtypeStruct((4, 3), np.float32),
                          jax.ShapeDtypeStruct((1, 1), np.float32))
    ours = jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)", None])
    outs = tf.function(ours, autograph=False).get_concrete_function(*specs).structured_outputs
    assert [tuple(o.shape) for o in outs] == [w.shape for w in want] == [(8, 3), (4, 1), ()]
    got = tf.function(ours, autograph=False)(np.ones((4, 3), np.float32),
                                             np.full((1, 1), 2.0, np.float32))
    np.testing.assert_allclose(got[1].numpy(), np.full((4, 1), 2.0))
    peer = jax2tf.convert(f, polymorphic_shapes=["(b, 3)", None])
    peer_outs = tf.function(peer, autograph=False).get_concrete_function(
        *specs).structured_outputs
    assert tuple(peer_outs[0].shape) == (None, 3)
    open_batch = tf.function(ours, autograph=False).get_concrete_function(
        tf.TensorSpec([None, 3]), specs[1]).structured_outputs
    assert [tuple(o.shape) for o in open_batch] == [(None, 3), (None, 1), ()]

    with tf.GradientTape() as tape:  # the gradient graph keeps working with the static sizes
        x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
        tape.watch(x)
        loss = tf.function(lambda v: tf.reduce_sum(ours(v, np.ones((1, 1), np.float32))[0]),
                           autograph=False)(x)
    grad = jax.grad(lambda v: jnp.sum(f(v, np.ones((1, 1), np.float32))[0]))(x.numpy())
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), grad, rtol=1e-6)
