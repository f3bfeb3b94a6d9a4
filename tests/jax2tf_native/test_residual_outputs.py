"""The residual forward returns only the residuals its backward reads.

`jax.nn.relu`'s JVP keeps a zeros array the size of its input among the pullback's leaves,
which the pullback never reads: the forward op no longer returns it (a 1.6 MB write and
allocation per training step of the example CNN at batch 64), and the backward rebuilds it.
Gradients stay JAX's, at every order, with static and symbolic shapes.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native import flat_function, vjp_functions


def _loss(w, x):
    return jnp.sum(jax.nn.relu(x @ w) ** 2)


def _forward_op_outputs(concrete_function) -> list[tuple[str, list]]:
    """(dtype, shape) of each output of the forward XlaCallModule op."""
    [op] = [op for op in concrete_function.graph.get_operations()
            if op.type == "XlaCallModule" and "jax2tf_vjp" not in op.name]
    return [(tf.as_dtype(t).name, tf.TensorShape(s).as_list())
            for t, s in zip(op.get_attr("Tout"), op.get_attr("Sout"))]


def test_unread_residual_is_not_a_forward_output(rng):
    w_np = rng.standard_normal((4, 6)).astype(np.float32)
    x_np = rng.standard_normal((5, 4)).astype(np.float32)
    flat = flat_function.flatten_user_function(
        _loss, jax.tree_util.tree_structure(((w_np, x_np), {})),
        [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (w_np, x_np)], "loss",
        gradient_inputs=(0,))
    forward = vjp_functions.residual_forward(flat)
    outs = forward.fwd(w_np, x_np)
    _, pullback = jax.vjp(lambda w: _loss(w, x_np), w_np)
    n_leaves = len(jax.tree_util.tree_leaves(pullback))
    assert [shape for _, shape, _ in forward.unused] == [(5, 6)]  # relu's zeros
    assert len(forward.residual_sources) == n_leaves - 1
    residuals = forward.residuals([w_np, x_np], outs[forward.n_outputs:])
    [dw] = vjp_functions.backward_from_residuals(forward)(*residuals, np.float32(1.0))
    np.testing.assert_allclose(dw, jax.grad(_loss)(w_np, x_np), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("polymorphic", [False, True], ids=["static", "symbolic batch"])
def test_training_step_of_a_relu_model_matches_jax(polymorphic, rng):
    w = tf.Variable(rng.standard_normal((4, 6)).astype(np.float32))
    x_np = rng.standard_normal((5, 4)).astype(np.float32)
    f_tf = jax2tf_native.convert(
        _loss, polymorphic_shapes=[None, "(b, 4)"] if polymorphic else None)

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None if polymorphic else 5, 4], tf.float32)])
    def step(x):
        with tf.GradientTape() as tape:
            loss = f_tf(w, x)
        return loss, tape.gradient(loss, w)

    loss, dw = step(tf.constant(x_np))
    want_loss, want_dw = jax.value_and_grad(_loss)(w.numpy(), x_np)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
    np.testing.assert_allclose(dw.numpy(), want_dw, rtol=1e-5, atol=1e-5)
    batch = None if polymorphic else 5
    # The loss, relu's mask and relu's output (for the square's derivative); not relu's zeros.
    assert _forward_op_outputs(step.get_concrete_function()) == [
        ("float32", []), ("bool", [batch, 6]), ("float32", [batch, 6])]


def test_second_and_third_order_through_unread_residuals(rng):
    w = tf.Variable(rng.standard_normal((4, 6)).astype(np.float32))
    x = tf.constant(rng.standard_normal((5, 4)).astype(np.float32))
    f_tf = jax2tf_native.convert(_loss)
    with tf.GradientTape() as t3:
        with tf.GradientTape() as t2:
            with tf.GradientTape() as t1:
                y = f_tf(w, x)
            g1 = t1.gradient(y, w)
            s1 = tf.reduce_sum(g1 ** 3)
        g2 = t2.gradient(s1, w)
        s2 = tf.reduce_sum(g2 ** 3)
    g3 = t3.gradient(s2, w)
    x_np = x.numpy()
    f1 = lambda w: jnp.sum(jax.grad(_loss)(w, x_np) ** 3)
    f2 = lambda w: jnp.sum(jax.grad(f1)(w) ** 3)
    w_np = w.numpy()
    for got, want in [(g1, jax.grad(_loss)(w_np, x_np)), (g2, jax.grad(f1)(w_np)),
                      (g3, jax.grad(f2)(w_np))]:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
