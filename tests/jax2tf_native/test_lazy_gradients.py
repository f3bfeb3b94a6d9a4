"""The default convert pays for gradients only when a tape asks: without a recording tape the
primal module runs (no residuals exported or returned), and a tape's backward computes only the
cotangents of the inputs it watches. Gradients that arrive another way (`tf.gradients`, an
outer tape around a `tf.function`, forward accumulators) still cover every input."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose
from tests.jax2tf_native.test_gradients import _exported_names, _params, mlp


def _loss(params, x):
    return jnp.sum(mlp(params, x) ** 2)


def _module_outputs(concrete_function) -> list[int]:
    return [len(op.get_attr("Tout")) for op in concrete_function.graph.get_operations()
            if op.type == "XlaCallModule"]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_inference_runs_the_primal_module_and_exports_nothing_else(graph, rng, caplog):
    params = _params(rng)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    f_tf = jax2tf_native.convert(mlp)
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    run = tf.function(f_tf, autograph=False) if graph else f_tf
    np.testing.assert_allclose(run(params, x).numpy(), mlp(params, x), rtol=1e-5, atol=1e-6)
    assert _exported_names(caplog) == ["mlp"]
    if graph:  # one output, no residuals
        assert _module_outputs(run.get_concrete_function(params, x)) == [1]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_training_step_skips_the_cotangent_of_the_unwatched_batch(graph, rng, caplog):
    params = _params(rng)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    f_tf = jax2tf_native.convert(_loss)  # default options: no gradient_argnums

    def step(x):
        with tf.GradientTape() as tape:
            loss = f_tf(variables, x)
        return loss, tape.gradient(loss, variables)

    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    loss, grads = (tf.function(step, autograph=False) if graph else step)(tf.constant(x))
    want_loss, want_grads = jax.value_and_grad(_loss)(params, x)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
    assert_tree_allclose({k: g.numpy() for k, g in grads.items()}, want_grads,
                         rtol=1e-5, atol=1e-5)
    assert _exported_names(caplog) == ["_loss_fwd", "_loss_bwd"]  # never the primal module
    [node] = f_tf._by_export_signature._data.values()
    [variant] = node._variants.values()
    assert [tuple(a.shape) for a in variant.backward().exported.out_avals] == [
        params[k].shape for k in sorted(params)]  # no cotangent for x


def _assert_loss_grads_equal_jax(params, x, grads, dx):
    """Asserts TF's gradients of `_loss` w.r.t. params and x equal JAX's; returns JAX's dx."""
    want_grads, want_dx = jax.grad(_loss, argnums=(0, 1))(params, x.numpy())
    assert_tree_allclose({k: g.numpy() for k, g in grads.items()}, want_grads,
                         rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=1e-5, atol=1e-5)
    return want_dx


def test_watched_batch_gets_its_gradient_too(rng):
    params = _params(rng)
    x = tf.constant(rng.standard_normal((5, 4)).astype(np.float32))
    variables = {k: tf.Variable(v) for k, v in params.items()}
    f_tf = jax2tf_native.convert(_loss)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        loss = f_tf(variables, x)
    grads, dx = tape.gradient(loss, [variables, x])
    want_dx = _assert_loss_grads_equal_jax(params, x, grads, dx)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), want_dx, rtol=1e-5, atol=1e-5)


def test_outer_tape_around_a_function_traced_for_inference(rng):
    params = _params(rng)
    x = tf.constant(rng.standard_normal((3, 4)).astype(np.float32))
    serve = tf.function(jax2tf_native.convert(_loss), autograph=False)
    serve(params, x)  # traced without a tape: the primal module
    p_tf = {k: tf.constant(v) for k, v in params.items()}
    with tf.GradientTape() as tape:
        tape.watch([p_tf, x])
        loss = serve(p_tf, x)
    grads, dx = tape.gradient(loss, [p_tf, x])
    _assert_loss_grads_equal_jax(params, x, grads, dx)


def test_outer_tape_sees_every_input_through_an_inner_training_step(rng):
    # The inner tape watches the weights only; the outer gradient w.r.t. x goes through the
    # function's graph gradient, which covers every input.
    fun = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    w = tf.Variable(rng.standard_normal((4, 2)).astype(np.float32))
    x = tf.constant(rng.standard_normal((3, 4)).astype(np.float32))
    f_tf = jax2tf_native.convert(fun)

    @tf.function(autograph=False)
    def step(x):
        with tf.GradientTape() as inner:
            y = f_tf(w, x)
        return y, inner.gradient(y, w)

    with tf.GradientTape() as outer:
        outer.watch(x)
        y, g = step(x)
    np.testing.assert_allclose(g.numpy(), jax.grad(fun)(w.numpy(), x.numpy()), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(outer.gradient(y, x).numpy(),
                               jax.grad(fun, argnums=1)(w.numpy(), x.numpy()),
                               rtol=1e-5, atol=1e-6)


def test_tf_gradients_in_a_tf1_graph_next_to_a_tape(rng):
    fun = lambda w, x: jnp.sum(jnp.sin(x @ w))
    w_np = rng.standard_normal((4, 2)).astype(np.float32)
    x_np = rng.standard_normal((3, 4)).astype(np.float32)
    f_tf = jax2tf_native.convert(fun)
    with tf.Graph().as_default():
        w, x = tf.constant(w_np), tf.constant(x_np)
        with tf.GradientTape() as tape:
            tape.watch(w)  # the tape asks for w only; tf.gradients asks for x
            y = f_tf(w, x)
        dw = tape.gradient(y, w)
        [dx] = tf.compat.v1.gradients(y, [x])
        with tf.compat.v1.Session() as session:
            dw, dx = session.run([dw, dx])
    want_dw, want_dx = jax.grad(fun, argnums=(0, 1))(w_np, x_np)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)


def test_forward_accumulator_next_to_a_tape_gets_every_tangent(rng):
    fun = lambda w, x: jnp.sum(jnp.sin(x @ w))
    w = tf.constant(rng.standard_normal((4, 2)).astype(np.float32))
    x = tf.constant(rng.standard_normal((3, 4)).astype(np.float32))
    tw = tf.constant(rng.standard_normal((4, 2)).astype(np.float32))
    tx = tf.constant(rng.standard_normal((3, 4)).astype(np.float32))
    f_tf = jax2tf_native.convert(fun)
    with tf.autodiff.ForwardAccumulator([w, x], [tw, tx]) as acc:
        with tf.GradientTape() as tape:
            tape.watch(w)  # the tape watches w only
            y = f_tf(w, x)
    _, want = jax.jvp(fun, (w.numpy(), x.numpy()), (tw.numpy(), tx.numpy()))
    np.testing.assert_allclose(acc.jvp(y).numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tape.gradient(y, w).numpy(),
                               jax.grad(fun)(w.numpy(), x.numpy()), rtol=1e-5, atol=1e-6)


def test_third_order_through_a_partly_watched_call(rng):
    fun = lambda w, x: jnp.sum(jnp.sin(x * w))
    w = tf.Variable(np.float32(0.7))
    x = tf.constant(rng.standard_normal(3).astype(np.float32))
    f_tf = jax2tf_native.convert(fun)
    with tf.GradientTape() as t3:
        with tf.GradientTape() as t2:
            with tf.GradientTape() as t1:
                y = f_tf(w, x)
            g1 = t1.gradient(y, w)
        g2 = t2.gradient(g1, w)
    g3 = t3.gradient(g2, w)
    d = lambda f: jax.grad(f)
    f_w = lambda w: fun(w, x.numpy())
    for got, want in [(g1, d(f_w)), (g2, d(d(f_w))), (g3, d(d(d(f_w))))]:
        np.testing.assert_allclose(got.numpy(), want(np.float32(0.7)), rtol=1e-4, atol=1e-5)
