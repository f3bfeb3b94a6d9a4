"""`gradient_argnums`: TF gradients for the chosen arguments only, as `jax.grad(argnums=...)`."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose
from tests.jax2tf_native.test_gradients import _exported_names, _params, mlp


def _loss(params, x, scale):
    return jnp.sum(mlp(params, x)) * scale


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_gradients_of_chosen_arguments_match_jax_and_others_are_none(graph, rng):
    params = _params(rng)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x_tf, scale = tf.constant(x), tf.constant(np.float32(1.5))
    f_tf = jax2tf_native.convert(_loss, gradient_argnums=0, polymorphic_shapes=[None, "b, 4", None])

    def step():
        with tf.GradientTape() as tape:
            tape.watch([x_tf, scale])
            loss = f_tf(variables, x_tf, scale)
        return loss, tape.gradient(loss, [variables, x_tf, scale])

    loss, (grads, dx, dscale) = (tf.function(step, autograph=False) if graph else step)()
    want_loss, want_grads = jax.value_and_grad(_loss)(params, x, np.float32(1.5))
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
    assert_tree_allclose({k: g.numpy() for k, g in grads.items()}, want_grads,
                         rtol=1e-5, atol=1e-6)
    assert dx is None and dscale is None


def test_backward_module_computes_only_the_chosen_cotangents(rng, caplog):
    params = _params(rng)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    f_tf = jax2tf_native.convert(_loss, gradient_argnums=[0])
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    with tf.GradientTape() as tape:
        loss = f_tf(variables, x, 2.0)
    tape.gradient(loss, variables)
    assert _exported_names(caplog) == ["_loss_fwd", "_loss_bwd"]
    [node] = f_tf._by_export_signature._data.values()  # the one export signature
    # One cotangent per parameter leaf, none for x or the scale.
    assert [tuple(a.shape) for a in node.backward().exported.out_avals] == [
        params[k].shape for k in sorted(params)]


@pytest.mark.parametrize("mode", ["residuals", "recompute"])
def test_second_order_with_gradient_argnums_matches_jax(mode, rng):
    fun = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = tf.Variable(rng.standard_normal((4, 2)).astype(np.float32))
    f_tf = jax2tf_native.convert(fun, gradient_argnums=0, gradient_mode=mode)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = f_tf(w, x)
        g = inner.gradient(y, w)
        s = tf.reduce_sum(g * g)
    hv = outer.gradient(s, w)
    jg = jax.grad(fun)
    np.testing.assert_allclose(g.numpy(), jg(w.numpy(), x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hv.numpy(), jax.grad(lambda w: jnp.sum(jg(w, x) ** 2))(w.numpy()),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["residuals", "recompute"])
def test_mixed_second_order_sees_arguments_left_out_of_the_first(mode, rng):
    # A gradient penalty: first order w.r.t. the input only, then its norm w.r.t. the weights.
    critic = lambda w, x: jnp.sum(jnp.tanh(x @ w))
    w = tf.Variable(rng.standard_normal((4, 2)).astype(np.float32))
    x = tf.constant(rng.standard_normal((3, 4)).astype(np.float32))
    f_tf = jax2tf_native.convert(critic, gradient_argnums=1, gradient_mode=mode)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f_tf(w, x)
        assert inner.gradient(y, w) is None  # not in gradient_argnums
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f_tf(w, x)
        penalty = tf.reduce_sum(inner.gradient(y, x) ** 2)
    want = jax.grad(lambda w: jnp.sum(jax.grad(critic, argnums=1)(w, x.numpy()) ** 2))(w.numpy())
    np.testing.assert_allclose(outer.gradient(penalty, w).numpy(), want, rtol=1e-4, atol=1e-5)


def test_numpy_integer_gradient_argnums_are_accepted(rng):
    params = _params(rng)
    f_tf = jax2tf_native.convert(_loss, gradient_argnums=np.int64(0))
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with tf.GradientTape() as tape:
        loss = f_tf(variables, x, 1.0)
    assert_tree_allclose({k: g.numpy() for k, g in tape.gradient(loss, variables).items()},
                         jax.grad(_loss)(params, x, np.float32(1.0)), rtol=1e-5, atol=1e-6)


def test_gradient_argnums_naming_only_integers_says_so():
    f_tf = jax2tf_native.convert(lambda labels, w: jnp.sum(labels * w), gradient_argnums=0)
    with pytest.raises(jax2tf_native.GradientSpecError,
                       match=r"selects no float or complex array \(args\[0\]: int32\)"):
        f_tf(np.array([1, 2], np.int32), np.float32(2.0))


def test_a_residual_policy_that_breaks_the_export_is_reported_not_dropped(rng):
    # A policy factory passed without calling it: the export fails only because of the policy.
    f_tf = jax2tf_native.convert(lambda w, x: jnp.sum(jnp.tanh(x @ w)),
                                 residual_policy=jax.checkpoint_policies.save_only_these_names)
    w = tf.Variable(rng.standard_normal((4, 2)).astype(np.float32))
    with pytest.raises(jax2tf_native.GradientSpecError,
                       match=r"residual_policy=.*fails on <lambda>: .*Fix: pass a "
                             r"jax.checkpoint_policies value"):
        with tf.GradientTape():
            f_tf(w, np.ones((3, 4), np.float32))


def test_residual_policy_with_recompute_mode_is_refused():
    with pytest.raises(ValueError, match=r"residual_policy chooses the residuals of "
                                         r"gradient_mode='residuals'"):
        jax2tf_native.convert(_loss, gradient_mode="recompute",
                              residual_policy=jax.checkpoint_policies.dots_saveable)


@pytest.mark.parametrize("bad", [-1, True, "0", 1.0, [0, None], {0: 1}])
def test_invalid_gradient_argnums_say_what_is_expected(bad):
    with pytest.raises(ValueError, match=r"gradient_argnums must be None, an int >= 0 .*Fix:"):
        jax2tf_native.convert(_loss, gradient_argnums=bad)


def test_gradient_argnums_past_the_arguments_names_the_count(rng):
    f_tf = jax2tf_native.convert(lambda a, b: a * b, gradient_argnums=(0, 2))
    with pytest.raises(jax2tf_native.GradientSpecError, match=r"names argument 2, but the function was called with "
                                         r"2 positional argument\(s\)"):
        f_tf(np.float32(1.0), np.float32(2.0))


def test_residual_policy_keeps_fewer_residuals_and_matches_jax(rng):
    params = _params(rng)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    results = {}
    for policy in (None, jax.checkpoint_policies.dots_saveable):
        f_tf = jax2tf_native.convert(_loss, residual_policy=policy, gradient_argnums=0)
        with tf.GradientTape() as tape:
            loss = f_tf(variables, x, 1.0)
        grads = tape.gradient(loss, variables)
        assert_tree_allclose({k: g.numpy() for k, g in grads.items()},
                             jax.grad(_loss)(params, x, np.float32(1.0)), rtol=1e-5, atol=1e-6)
        [node] = f_tf._by_export_signature._data.values()
        results[policy] = len(node.forward().prepared.exported.out_avals)
    # The relu mask and output are recomputed from the saved matmul output.
    assert results[jax.checkpoint_policies.dots_saveable] < results[None]


def test_residual_policy_must_be_a_policy():
    with pytest.raises(TypeError, match="residual_policy must be None or a jax.checkpoint_poli"):
        jax2tf_native.convert(_loss, residual_policy="dots_saveable")


def _loss_and_metric(params, x):
    loss = jnp.sum(mlp(params, x))
    metric = jnp.mean(jnp.tanh(x @ params["w1"]) ** 3)  # has residuals of its own
    return loss, metric


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_gradient_outputs_keeps_residuals_for_the_chosen_results_only(graph, rng):
    params = _params(rng)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    converted = {which: jax2tf_native.convert(_loss_and_metric, gradient_outputs=which)
                 for which in (None, 0)}

    def step(f_tf):
        with tf.GradientTape(persistent=True) as tape:
            loss, metric = f_tf(variables, x)
        return loss, metric, tape.gradient(loss, variables), tape.gradient(metric, variables)

    run = tf.function(step, autograph=False) if graph else step
    loss, metric, grads, metric_grads = run(converted[0])
    (want_loss, want_metric), want_grads = jax.value_and_grad(
        _loss_and_metric, has_aux=True)(params, x)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
    np.testing.assert_allclose(metric.numpy(), want_metric, rtol=1e-5)
    assert_tree_allclose({k: g.numpy() for k, g in grads.items()}, want_grads,
                         rtol=1e-5, atol=1e-6)
    assert all(g is None for g in metric_grads.values())
    run(converted[None])
    n_outputs = {which: len(next(iter(f._by_export_signature._data.values()))
                            .forward().prepared.exported.out_avals)
                 for which, f in converted.items()}
    assert n_outputs[0] < n_outputs[None]  # the metric's tanh residuals are not returned


def test_gradient_outputs_past_the_results_names_the_count(rng, caplog):
    f_tf = jax2tf_native.convert(_loss_and_metric, gradient_outputs=[0, 2])
    caplog.set_level(logging.DEBUG, logger="jax2tf_native")
    with pytest.raises(jax2tf_native.GradientSpecError, match=r"names result 2, but _loss_and_metric returns 2 "
                                         r"result\(s\)"):
        f_tf(_params(rng), np.ones((2, 4), np.float32))
    assert "no residual forward" not in caplog.text  # raised at once, not after a fallback


def test_invalid_gradient_outputs_say_what_is_expected():
    with pytest.raises(ValueError, match=r"gradient_outputs must be None, an int >= 0 .*Fix: "
                                         r"e.g. gradient_outputs=0"):
        jax2tf_native.convert(_loss_and_metric, gradient_outputs=-2)
