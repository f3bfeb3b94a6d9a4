"""call_tf inside convert with a polymorphic batch (jax2tf_native.call_tf_split): the converted
function is split at its TF calls. Values and gradients are compared with JAX's own (JAX runs
call_tf natively at each concrete batch), for several batch sizes through one tf.function traced
with a None batch, eagerly, and through a SavedModel; where TF cannot say a result's shape, or
the call sits in control flow, our CallTfShapeError says why and the fix."""
import numpy as np
import pytest
import tensorflow as tf
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import jax2tf

import jax2tf_native
from jax2tf_native.errors import CallTfShapeError
from tests.conftest import tape_value_and_gradients

BATCHES = (2, 5)


def _x(n, cols=3):
    return (np.random.RandomState(n).randn(n, cols) / 2).astype(np.float32)


def _value_and_grad_tf(f_tf, *xs):
    """f_tf(*xs) and the gradients of sum(sin(f_tf(*xs))): JAX's side is `loss` below."""
    return tape_value_and_gradients(f_tf, *xs, loss=lambda y: tf.reduce_sum(tf.math.sin(y)))


def _assert_matches_jax(f_jax, polymorphic_shapes, signature, make_args, batches=BATCHES):
    """Eager and one tf.function (None batch) against jax.jit(f_jax) and its gradient."""
    f_tf = jax2tf_native.convert(f_jax, polymorphic_shapes=polymorphic_shapes)
    traced = tf.function(lambda *xs: _value_and_grad_tf(f_tf, *xs), autograph=False,
                         input_signature=signature)
    loss = lambda *xs: jnp.sum(jnp.sin(f_jax(*xs)))
    for n in batches:
        args = make_args(n)
        want = f_jax(*args)  # op by op: call_tf_graph=True cannot run under jax.jit
        want_grads = jax.grad(loss, argnums=tuple(range(len(args))))(*args)
        for run in (lambda *xs: _value_and_grad_tf(f_tf, *xs), traced):
            y, grads = run(*args)
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
            assert len(grads) == len(want_grads)
            for g, w in zip(grads, want_grads):
                np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
    assert traced.experimental_get_tracing_count() == 1  # One trace served every batch.
    return f_tf


def _xla_call_modules(f_tf, signature):
    graph = tf.function(f_tf, autograph=False).get_concrete_function(*signature).graph
    return [op for op in graph.get_operations() if op.type == "XlaCallModule"], graph


SIG = [tf.TensorSpec([None, 3], tf.float32)]


@pytest.mark.parametrize("call_tf_graph", [False, True])
def test_top_level_call_tf_with_polymorphic_batch(call_tf_graph):
    tf_part = jax2tf.call_tf(lambda t: tf.math.cos(t) * 2.0, call_tf_graph=call_tf_graph)
    f = lambda x: jnp.tanh(tf_part(jnp.sin(x))) * x
    f_tf = _assert_matches_jax(f, ["(b, 3)"], SIG, lambda n: (_x(n),))
    # Two modules (before and after the TF call), the TF ops between them.
    modules, graph = _xla_call_modules(f_tf, SIG)
    assert len(modules) == 2
    assert "Cos" in {op.type for op in graph.get_operations()}


def test_the_peer_refuses_what_we_run():
    f = lambda x: jnp.sin(jax2tf.call_tf(lambda t: tf.math.cos(t))(x))
    with pytest.raises(ValueError, match="output has dynamic shape"):
        tf.function(jax2tf.convert(f, polymorphic_shapes=["(b, 3)"]), autograph=False,
                    input_signature=SIG).get_concrete_function()
    got = tf.function(jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)"]),
                      autograph=False, input_signature=SIG)(_x(4))
    np.testing.assert_allclose(got.numpy(), np.sin(np.cos(_x(4))), rtol=1e-6)


def test_several_calls_whose_result_shapes_are_expressions_of_the_batch():
    """TF doubles the batch (2*b), then flattens it ((6*b,)), then keeps the batch of a second
    argument of batch b+1: each result shape is fitted from TF's shape inference."""
    double = jax2tf.call_tf(lambda t: tf.concat([t, t * 0.5], axis=0))
    flatten = jax2tf.call_tf(lambda t: tf.reshape(t, [-1]), call_tf_graph=True)
    scale = jax2tf.call_tf(lambda t, s: t * tf.reduce_mean(s))

    def f(x, z):
        d = double(jnp.exp(x))                # (2b, 3)
        flat = flatten(d[:, ::-1])            # (6b,)
        w = scale(jnp.cos(z), flat)           # (b + 1, 3)
        return jnp.sum(w, axis=1)[:-1] + jnp.sum(flat.reshape(x.shape[0], 6), axis=1)

    sig = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None, 3], tf.float32)]
    f_tf = _assert_matches_jax(f, ["(b, 3)", "(b + 1, 3)"], sig,
                               lambda n: (_x(n), _x(n + 1)))
    assert len(_xla_call_modules(f_tf, sig)[0]) == 4


def test_call_tf_inside_jax_jit_is_inlined_and_split():
    inner = jax.jit(lambda x: jnp.sum(jax2tf.call_tf(tf.math.sinh)(x * 2.0), axis=1) + 1.0)
    f = lambda x: inner(x) * jnp.max(x, axis=1)
    _assert_matches_jax(f, ["(b, 3)"], SIG, lambda n: (_x(n),))


def test_call_tf_inside_jax_checkpoint_is_inlined_and_split():
    tf_part = jax2tf.call_tf(lambda t: tf.math.cos(t) * t)
    f = jax.checkpoint(lambda x: jnp.sin(tf_part(jnp.tanh(x))) * x)
    _assert_matches_jax(f, ["(b, 3)"], SIG, lambda n: (_x(n),))


def test_pytree_arguments_and_results_keyword_argument():
    def f(inputs, *, scale):
        y = jax2tf.call_tf(lambda t: tf.math.softplus(t))(inputs["a"])
        return {"y": y * scale, "s": jnp.sum(inputs["b"], axis=1)}

    f_tf = jax2tf_native.convert(f, polymorphic_shapes=[{"a": "(b, 3)", "b": "(b, 2)"}])
    run = tf.function(lambda a, b: f_tf({"a": a, "b": b}, scale=3.0), autograph=False,
                      input_signature=[tf.TensorSpec([None, 3], tf.float32),
                                       tf.TensorSpec([None, 2], tf.float32)])
    for n in BATCHES:
        inputs = {"a": _x(n), "b": _x(n, 2)}
        want = jax.jit(lambda i: f(i, scale=3.0))(inputs)
        got = run(inputs["a"], inputs["b"])
        assert set(got) == {"y", "s"}
        for k in got:
            np.testing.assert_allclose(got[k].numpy(), want[k], rtol=1e-5, atol=1e-6)


def test_saved_model_with_polymorphic_signature_runs_at_two_batch_sizes(tmp_path):
    f = lambda x: jnp.sum(jax2tf.call_tf(lambda t: tf.math.cos(t) * t)(jnp.tanh(x)) ** 2, axis=1)
    module = tf.Module()
    module.f = tf.function(jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)"]),
                           autograph=False, input_signature=SIG)
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    for n in BATCHES:
        x = tf.constant(_x(n))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = restored.f(x)
            loss = tf.reduce_sum(y)
        np.testing.assert_allclose(y.numpy(), jax.jit(f)(_x(n)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                                   jax.grad(lambda x: jnp.sum(f(x)))(_x(n)), rtol=1e-5,
                                   atol=1e-6)


def test_tf_jax_tf_jax_nested_with_polymorphic_batches():
    """TF -> JAX -> TF -> JAX, every level polymorphic in the batch. The converted function's
    XlaCallModule op reports a None batch to TF's shape inference; its JAX function says the
    result shape instead."""
    inner_jax = lambda x: jnp.tanh(x) * 3.0
    inner_tf = jax2tf_native.convert(inner_jax, polymorphic_shapes=["(b, 3)"])
    middle = lambda x: jnp.exp(jax2tf.call_tf(inner_tf)(x * 0.5)) - x
    reference = lambda x: jnp.exp(inner_jax(x * 0.5)) - x
    f_tf = jax2tf_native.convert(middle, polymorphic_shapes=["(b, 3)"])
    run = tf.function(lambda x: _value_and_grad_tf(f_tf, x), autograph=False,
                      input_signature=SIG)
    for n in BATCHES:
        y, (g,) = run(_x(n))
        np.testing.assert_allclose(y.numpy(), reference(_x(n)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            g.numpy(), jax.grad(lambda x: jnp.sum(jnp.sin(reference(x))))(_x(n)),
            rtol=1e-5, atol=1e-6)
    # Wrapped in a tf.function of its own, TF's shape inference is all there is: refused.
    wrapped = tf.function(inner_tf, autograph=False)
    with pytest.raises(CallTfShapeError, match="even at the concrete argument shapes"):
        jax2tf_native.convert(lambda x: jax2tf.call_tf(wrapped)(x),
                              polymorphic_shapes=["(b, 3)"])(_x(2))


def test_declared_output_shape_dtype_uses_the_converted_functions_variables():
    """A shape TF cannot infer (a boolean mask) that the user knows: declared with "b"."""
    b, = jax.export.symbolic_shape("b")
    keep_all = jax2tf.call_tf(lambda t: tf.boolean_mask(t, tf.reduce_all(t > -100.0, axis=1)),
                              output_shape_dtype=jax.ShapeDtypeStruct((b, 3), np.float32))
    f = lambda x: jnp.sin(keep_all(x)) * x
    _assert_matches_jax(f, ["(b, 3)"], SIG, lambda n: (_x(n),))


def test_gradient_options_apply_to_the_split_function():
    tf_part = jax2tf.call_tf(lambda t: t * t)
    # The metric depends on w, so only gradient_outputs can cut it from w's gradient.
    f = lambda w, x: (jnp.sum(tf_part(x * w), axis=1), jnp.max(x * w, axis=1))
    w, x = tf.constant(np.float32(1.5)), tf.constant(_x(4))

    def gradients(f_tf):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([w, x])
            loss, metric = f_tf(w, x)
        return (tape.gradient(loss, w), tape.gradient(loss, x), tape.gradient(metric, w))

    want_w = [jax.grad(lambda w: jnp.sum(f(w, _x(4))[k]))(np.float32(1.5)) for k in (0, 1)]
    loss_w, loss_x, metric_w = gradients(jax2tf_native.convert(
        f, polymorphic_shapes=[None, "(b, 3)"], gradient_argnums=0, gradient_outputs=0))
    np.testing.assert_allclose(loss_w.numpy(), want_w[0], rtol=1e-5)
    assert loss_x is None       # x is not in gradient_argnums
    assert metric_w is None     # the metric is not in gradient_outputs
    # Without gradient_outputs the same metric has a gradient: the None above is the option's.
    _, _, metric_w = gradients(jax2tf_native.convert(
        f, polymorphic_shapes=[None, "(b, 3)"], gradient_argnums=0))
    np.testing.assert_allclose(metric_w.numpy(), want_w[1], rtol=1e-5)
    no_grad = jax2tf_native.convert(f, polymorphic_shapes=[None, "(b, 3)"],
                                    with_gradient=False)
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss, _ = no_grad(w, x)
    with pytest.raises(LookupError, match="with_gradient=False.*Fix"):
        tape.gradient(loss, w)


def test_plain_path_is_kept_when_no_call_tf_is_polymorphic():
    """Static call_tf arguments (a parameter) under a polymorphic batch, and functions without
    call_tf, stay one module (the split path is used only when it must be)."""
    f = lambda w, x: x @ jax2tf.call_tf(lambda t: tf.math.cos(t))(w)
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=[None, "(b, 3)"])
    w = np.eye(3, dtype=np.float32) * 0.3
    sig = [tf.TensorSpec([3, 3], tf.float32)] + SIG
    assert len(_xla_call_modules(f_tf, sig)[0]) == 1
    got = tf.function(f_tf, autograph=False, input_signature=sig)(w, _x(4))
    np.testing.assert_allclose(got.numpy(), f(w, _x(4)), rtol=1e-5)


def test_a_polymorphic_function_without_call_tf_is_traced_once_with_jax2tf_imported():
    """The search for a symbolic call_tf rides on the export's own trace (jax2tf is imported
    in this module, which used to cost every polymorphic conversion a second trace)."""
    traces = []

    def f(x):
        traces.append(x.shape)
        return jnp.sin(x) * 2.0

    got = jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)"], with_gradient=False)(_x(4))
    np.testing.assert_allclose(got.numpy(), jnp.sin(_x(4)) * 2.0, rtol=1e-6)
    assert len(traces) == 1, traces


def _own_custom_vjp(tf_part):
    @jax.custom_vjp
    def f(x):
        return tf_part(x) * 2.0

    f.defvjp(lambda x: (f(x), x), lambda x, ct: (ct * 2.0,))
    return f


@pytest.mark.parametrize("where, inside", [
    ("scan", "`scan`"), ("cond", "`cond`"), ("while_loop", "`while`"),
    ("custom_vjp", "a custom_vjp/custom_jvp of your own")])
def test_polymorphic_call_tf_in_control_flow_is_refused_clearly(where, inside):
    tf_part = jax2tf.call_tf(tf.math.cos)
    bodies = {
        "scan": lambda x: lax.scan(lambda c, _: (tf_part(c), None), x, None, length=2)[0],
        "cond": lambda x: lax.cond(x[0, 0] > 0, tf_part, jnp.sin, x),
        "while_loop": lambda x: lax.while_loop(lambda c: c[0, 0] < 5.0,
                                               lambda c: tf_part(c) + 1.0, x),
        "custom_vjp": _own_custom_vjp(tf_part),
    }
    f_tf = jax2tf_native.convert(bodies[where], polymorphic_shapes=["(b, 3)"])
    with pytest.raises(CallTfShapeError, match=f"inside {inside}.*Fix: move the call_tf"):
        f_tf(_x(4))


def test_static_call_tf_inside_control_flow_still_runs():
    """In a scan, a call_tf on static shapes compiles into the module as before."""
    tf_part = jax2tf.call_tf(lambda t: tf.math.cos(t) * 0.5)
    f = lambda w, x: lax.scan(lambda c, _: (c @ tf_part(w), None), x, None, length=2)[0]
    w = np.eye(3, dtype=np.float32)
    got = jax2tf_native.convert(f, polymorphic_shapes=[None, "(b, 3)"])(w, _x(4))
    np.testing.assert_allclose(got.numpy(), jax.jit(f)(w, _x(4)), rtol=1e-5)


@pytest.mark.parametrize("tf_fun, where, why", [
    (lambda t: tf.boolean_mask(t, t[:, 0] > 0), "result 0, dimension 0",
     "even at the concrete argument shapes"),
    (lambda t: tf.reshape(tf.einsum("ij,kj->ik", t, t), [-1]), "result 0, dimension 0",
     "not an integer linear function of \\['b'\\]"),
    # No rank at all, even at concrete shapes (a numpy_function says nothing).
    (lambda t: tf.numpy_function(np.sin, [t], tf.float32), "result 0 has",
     "gives <unknown> even at the concrete argument shapes"),
])
def test_result_shape_tf_cannot_say_is_refused_with_the_fix(tf_fun, where, why):
    f = lambda x: jnp.sum(jax2tf.call_tf(tf_fun)(x))
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)"])
    assert jax2tf_native.CallTfShapeError is CallTfShapeError
    with pytest.raises(CallTfShapeError,
                       match=f"call_tf\\(<lambda>\\), call #1 .*float32\\[b, 3\\]"
                             f".*{where}.*{why}"
                             f".*Fix: declare it, call_tf\\(f, output_shape_dtype="):
        f_tf(_x(4))


def test_wrong_batch_between_arguments_is_our_error():
    f = lambda x, y: jax2tf.call_tf(lambda a, b: a * b[:, None])(x, y)
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)", "(b,)"])
    with pytest.raises(jax2tf_native.ArgumentShapeError, match="args\\[1\\]"):
        f_tf(_x(4), np.ones((5,), np.float32))


def test_saved_model_tools_save_with_polymorphic_batch_and_parameter_gradients(tmp_path):
    import saved_model_tools
    scale = jax2tf.call_tf(lambda t: tf.math.tanh(t) + 1.0)

    def model(params, x):
        return jnp.sum(scale(x @ params["w"]) ** 2, axis=1)

    params = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    saved_model_tools.save(str(tmp_path / "m"), model, params, [_x(2)],
                           polymorphic_shapes=["(b, 3)"])
    restored = tf.saved_model.load(str(tmp_path / "m"))
    serving = restored.signatures["serving_default"]
    variable = restored.trainable_variables[0]
    for n in BATCHES:
        with tf.GradientTape() as tape:
            y = list(serving(input_0=tf.constant(_x(n))).values())[0]
            loss = tf.reduce_sum(y)
        np.testing.assert_allclose(y.numpy(), model(params, _x(n)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            tape.gradient(loss, variable).numpy(),
            jax.grad(lambda p: jnp.sum(model(p, _x(n))))(params)["w"], rtol=1e-5, atol=1e-5)


def test_batch_written_as_an_expression_and_constants_around_the_call():
    """The spec "(2*b, 3)" names no bare "b" (each stretch gets the original argument to read b
    from); a constant is passed to the TF call and returned as a result."""
    weights = np.arange(3, dtype=np.float32) - 1.0
    f = lambda x: (jnp.sum(jax2tf.call_tf(lambda t, w: tf.concat([t, t * w], 0))(x, weights),
                           axis=1) * 2.0, weights)
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=["(2*b, 3)"])
    run = tf.function(f_tf, autograph=False, input_signature=SIG)
    for n in (2, 6):
        got_all, want_all = run(_x(n)), f(_x(n))
        assert len(got_all) == len(want_all) == 2
        for got, want in zip(got_all, want_all):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_reloaded_tf_saved_model_with_none_batch_called_from_a_polymorphic_conversion(tmp_path):
    """A TF SavedModel (pre-processing saved with a None batch), reloaded and called with
    call_tf: TF infers its result shape at concrete shapes through the restored function."""
    module = tf.Module()
    module.f = tf.function(lambda t: tf.math.cos(t) * 2.0 + tf.reduce_mean(t, axis=1,
                                                                           keepdims=True),
                           input_signature=SIG)
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    reference = lambda x: jnp.cos(x) * 2.0 + jnp.mean(x, axis=1, keepdims=True)
    f = lambda x: jnp.sin(jax2tf.call_tf(restored.f)(x)) * x
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=["(b, 3)"])
    run = tf.function(lambda x: _value_and_grad_tf(f_tf, x), autograph=False,
                      input_signature=SIG)
    loss = lambda x: jnp.sum(jnp.sin(jnp.sin(reference(x)) * x))
    for n in BATCHES:
        y, (g,) = run(_x(n))
        np.testing.assert_allclose(y.numpy(), jnp.sin(reference(_x(n))) * _x(n), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(g.numpy(), jax.grad(loss)(_x(n)), rtol=1e-5, atol=1e-6)
