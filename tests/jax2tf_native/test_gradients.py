"""TF gradients through exported JAX VJPs: JAX-accurate, any order, no forward recomputation."""
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose


def mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.sum(jax.nn.log_softmax(h @ params["w2"]), axis=-1)


def _params(rng):
    return {"w1": rng.standard_normal((4, 8)).astype(np.float32) * 0.5,
            "b1": rng.standard_normal((8,)).astype(np.float32) * 0.1,
            "w2": rng.standard_normal((8, 3)).astype(np.float32) * 0.5}


def _exported_names(caplog):
    return [m.group(1) for r in caplog.records
            if (m := re.match(r"jax2tf_native: exporting (\S+) for", r.getMessage()))]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_gradients_wrt_variables_in_a_module_match_jax(graph, rng, caplog):
    params = _params(rng)

    class Model(tf.Module):
        def __init__(self):
            self.params = {k: tf.Variable(v, name=k) for k, v in params.items()}
            self.apply = jax2tf_native.convert(mlp, polymorphic_shapes=[None, "(b, 4)"])

        def loss_and_grads(self, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(self.apply(self.params, x))
            return loss, tape.gradient(loss, self.params)

    model = Model()
    step = tf.function(model.loss_and_grads, autograph=False) if graph else model.loss_and_grads
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    for batch in (2, 5):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        loss, grads = step(x)
        want_loss, want_grads = jax.value_and_grad(lambda p: jnp.sum(mlp(p, x)))(params)
        np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
        assert_tree_allclose({k: g.numpy() for k, g in grads.items()}, want_grads,
                             rtol=1e-5, atol=1e-6)
    # Residual mode: one forward-with-residuals and one backward export serve every batch size;
    # the recomputing VJP is never exported for a first-order gradient.
    assert _exported_names(caplog) == ["mlp_fwd", "mlp_bwd"]


def test_recompute_mode_exports_the_vjp_and_agrees(rng, caplog):
    params = _params(rng)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    f_tf = jax2tf_native.convert(mlp, gradient_mode="recompute")
    p_tf = {k: tf.constant(v) for k, v in params.items()}
    with tf.GradientTape() as tape:
        tape.watch(p_tf)
        loss = tf.reduce_sum(f_tf(p_tf, x))
    grads = tape.gradient(loss, p_tf)
    assert_tree_allclose({k: g.numpy() for k, g in grads.items()},
                         jax.grad(lambda p: jnp.sum(mlp(p, x)))(params), rtol=1e-5, atol=1e-6)
    assert _exported_names(caplog) == ["mlp", "mlp_vjp"]


def test_falls_back_to_recompute_when_residual_shapes_are_unsolvable(rng, caplog):
    # d/dx sum(x) has no residual carrying `b`: the backward module's inputs (a scalar
    # cotangent) cannot determine `b`, so the backward recomputes, and says why.
    fun = lambda x: jnp.sum(jnp.sin(x))
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=["b"])
    x = tf.constant(rng.standard_normal(5).astype(np.float32))
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f_tf(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos(x.numpy()), rtol=1e-6)
    messages = " ".join(r.getMessage() for r in caplog.records)
    if "backward from residuals not exportable" not in messages:
        assert "<lambda>_bwd" in _exported_names(caplog)  # JAX solved it after all: no fallback
    else:
        assert "recomputing the forward pass" in messages


@pytest.mark.parametrize("mode", ["residuals", "recompute"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_second_order_tape_in_tape(mode, graph, rng):
    fun = lambda x, w: jnp.sum(jnp.tanh(x @ w) ** 2)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = tf.Variable(rng.standard_normal((4, 2)).astype(np.float32))
    f_tf = jax2tf_native.convert(fun, gradient_mode=mode, polymorphic_shapes=["b, _", None])

    def hessian_vector():
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                y = f_tf(x, w)
            g = inner.gradient(y, w)
            s = tf.reduce_sum(g * g)
        return g, outer.gradient(s, w)

    run = tf.function(hessian_vector, autograph=False) if graph else hessian_vector
    g, hv = run()
    jg = jax.grad(fun, argnums=1)
    want_hv = jax.grad(lambda w: jnp.sum(jg(x, w) ** 2))(w.numpy())
    np.testing.assert_allclose(g.numpy(), jg(x, w.numpy()), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hv.numpy(), want_hv, rtol=1e-4, atol=1e-5)


def test_hessian_via_jacobian_of_gradient(rng):
    fun = lambda x: jnp.sum(jnp.sin(x) * x[::-1])
    x = tf.constant(rng.standard_normal(4).astype(np.float32))
    f_tf = jax2tf_native.convert(fun)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f_tf(x)
        g = inner.gradient(y, x)
    hessian = outer.jacobian(g, x)
    np.testing.assert_allclose(hessian.numpy(), jax.hessian(fun)(x.numpy()), rtol=1e-5, atol=1e-6)


def test_third_order_matches_jax():
    fun = lambda x: jnp.sum(jnp.sin(x) ** 3)
    x = tf.constant(np.array([0.3, -1.2], np.float32))
    f_tf = jax2tf_native.convert(fun)
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = f_tf(x)
            g1 = tf.reduce_sum(t1.gradient(y, x))
        g2 = tf.reduce_sum(t2.gradient(g1, x))
    g3 = t3.gradient(g2, x)
    d1 = lambda x: jnp.sum(jax.grad(fun)(x))
    d2 = lambda x: jnp.sum(jax.grad(d1)(x))
    np.testing.assert_allclose(g3.numpy(), jax.grad(d2)(x.numpy()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_edge_semantics_match_jax2tf(graph):
    """Integer inputs -> None; unused float input -> zeros; integer outputs cut the path;
    outputs with no cotangent count as zeros; pytree arguments and results."""
    from jax.experimental import jax2tf

    def fun(inputs, unused):
        x, n = inputs["x"], inputs["n"]
        return {"y": jnp.sum(jnp.sin(x) * n), "positive": (x > 0).astype(jnp.int32),
                "square": x * x}

    x = tf.Variable(np.array([0.5, -2.0, 1.0], np.float32))
    n = tf.Variable(np.array([3, 4, 5], np.int32))
    unused = tf.Variable(np.float32(2.0))

    def grads(f_tf):
        with tf.GradientTape(persistent=True) as tape:
            out = f_tf({"x": x, "n": n}, unused)
        return (tape.gradient(out["y"], [x, n, unused]), tape.gradient(out["positive"], x),
                tape.gradient(out["square"], x))

    ours = jax2tf_native.convert(fun)
    peer = jax2tf.convert(fun)
    run = (lambda f: tf.function(lambda: grads(f), autograph=False)()) if graph else grads
    (g_ours, pos_ours, sq_ours), (g_peer, pos_peer, sq_peer) = run(ours), run(peer)
    np.testing.assert_allclose(g_ours[0].numpy(), np.cos(x.numpy()) * n.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g_ours[0].numpy(), g_peer[0].numpy(), rtol=1e-6)
    assert g_ours[1] is None and g_peer[1] is None
    np.testing.assert_array_equal(g_ours[2].numpy(), 0.0)
    np.testing.assert_array_equal(g_peer[2].numpy(), 0.0)
    assert pos_ours is None and pos_peer is None
    np.testing.assert_allclose(sq_ours.numpy(), 2 * x.numpy(), rtol=1e-6)


def test_with_gradient_false_prevents_gradient_with_the_fix():
    f_tf = jax2tf_native.convert(jnp.sin, with_gradient=False)
    x = tf.Variable(np.ones(3, np.float32))
    with tf.GradientTape() as tape:
        y = f_tf(x)
    np.testing.assert_allclose(y.numpy(), np.sin(1.0), rtol=1e-6)
    with pytest.raises(LookupError, match="Fix: convert with with_gradient=True"):
        tape.gradient(y, x)


def test_non_differentiable_function_still_runs_forward(caplog):
    """A real while_loop has no reverse-mode derivative in JAX: the forward still converts and
    runs, and a gradient request fails with JAX's explanation."""
    def fun(x):
        return jax.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * 2, c[1] + 1), (x, 0))[0]

    caplog.set_level(logging.INFO, logger="jax2tf_native")
    f_tf = jax2tf_native.convert(fun)
    x = tf.constant(np.ones(2, np.float32))
    np.testing.assert_allclose(f_tf(x).numpy(), [8.0, 8.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f_tf(x)
    with pytest.raises(Exception, match="(?i)reverse-mode differentiation does not work"):
        tape.gradient(y, x)
