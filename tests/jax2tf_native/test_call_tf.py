"""jax2tf.call_tf inside converted functions: TF in JAX in TF, with gradients, in tf.function,
through SavedModels, and several levels deep. Each result is compared with JAX's own (JAX runs
call_tf natively), and with the peer where it runs."""
import numpy as np
import pytest
import tensorflow as tf
import jax
import jax.numpy as jnp
from jax.experimental import jax2tf

import jax2tf_native
import saved_model_tools
from jax2tf_native.errors import ExportedModuleError
from tests.conftest import tape_value_and_gradients

X = (np.arange(6, dtype=np.float32).reshape(2, 3) - 1.5) / 7


def _jax_fun(call_tf_graph: bool):
    tf_part = jax2tf.call_tf(lambda t: tf.math.cos(t) * 2.0, call_tf_graph=call_tf_graph)
    return lambda x: jnp.sum(jnp.sin(tf_part(x)) * x)


def _assert_value_and_grad_eager_and_in_tf_function(f_tf, want, want_grad):
    for run in (lambda x: tape_value_and_gradients(f_tf, x),
                tf.function(lambda x: tape_value_and_gradients(f_tf, x), autograph=False)):
        y, (g,) = run(X)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(g.numpy(), want_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call_tf_graph", [False, True])
def test_call_tf_values_and_gradients_eager_and_in_tf_function(call_tf_graph):
    f_jax = _jax_fun(call_tf_graph)
    want, want_grad = jax.value_and_grad(f_jax)(X)
    f_tf = jax2tf_native.convert(f_jax)
    _assert_value_and_grad_eager_and_in_tf_function(f_tf, want, want_grad)


def test_call_tf_graph_module_calls_the_tf_function_through_function_list():
    """call_tf_graph=True is not inlined: the op names the TF function it calls."""
    f_tf = jax2tf_native.convert(_jax_fun(True), with_gradient=False)
    graph = tf.function(f_tf, autograph=False).get_concrete_function(
        tf.TensorSpec(X.shape, tf.float32)).graph
    ops = [op for op in graph.get_operations() if op.type == "XlaCallModule"]
    assert len(ops) == 1
    names = [f.name for f in ops[0].get_attr("function_list")]
    library = {f.signature.name for f in graph.as_graph_def().library.function}
    assert len(names) == 1 and names[0] in library, (names, library)


def test_call_tf_graph_converted_again_still_runs_where_the_peer_fails():
    """The peer collects call_tf_graph functions while lowering, so a second conversion of the
    same function (JAX's lowering cache hit) has an empty function_list and fails at run time;
    ours runs every time (pinned against the peer)."""
    f_jax = _jax_fun(True)
    want = f_jax(X)
    for _ in range(2):
        np.testing.assert_allclose(jax2tf_native.convert(f_jax)(X).numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(
            tf.function(jax2tf_native.convert(f_jax), autograph=False)(X).numpy(), want,
            rtol=1e-6)
    with pytest.raises(tf.errors.NotFoundError, match="tf.call_tf_function"):
        jax2tf.convert(f_jax)(X)
        tf.function(jax2tf.convert(f_jax), autograph=False)(X)


@pytest.mark.parametrize("call_tf_graph", [False, True])
def test_call_tf_through_plain_saved_model_with_gradient(tmp_path, call_tf_graph):
    f_jax = _jax_fun(call_tf_graph)
    want, want_grad = jax.value_and_grad(f_jax)(X)
    module = tf.Module()
    module.f = tf.function(jax2tf_native.convert(f_jax), autograph=False,
                           input_signature=[tf.TensorSpec(X.shape, tf.float32)])
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    y, (g,) = tape_value_and_gradients(restored.f, X)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), want_grad, rtol=1e-5, atol=1e-6)


def test_call_tf_through_saved_model_tools_save(tmp_path):
    """A reloaded-SavedModel-style TF function called from JAX, saved with our writer, and
    fine-tuned in TF: values and parameter gradients equal JAX's."""
    scale = jax2tf.call_tf(lambda t: tf.math.tanh(t) + 1.0)

    def model(params, x):
        return jnp.sum(scale(x @ params["w"]) ** 2)

    params = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    saved_model_tools.save(str(tmp_path / "m"), model, params, [X])
    restored = tf.saved_model.load(str(tmp_path / "m"))
    serving = restored.signatures["serving_default"]
    out = list(serving(input_0=tf.constant(X)).values())[0]
    np.testing.assert_allclose(out.numpy(), model(params, X), rtol=1e-6)
    variable = restored.trainable_variables[0]
    with tf.GradientTape() as tape:
        y = list(serving(input_0=tf.constant(X)).values())[0]
    np.testing.assert_allclose(tape.gradient(y, variable).numpy(),
                               jax.grad(model)(params, X)["w"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call_tf_graph", [False, True])
def test_tf_jax_tf_jax_nested_with_gradients(call_tf_graph):
    """TF -> JAX -> TF -> JAX: a converted function calls TF that calls a converted function."""
    inner_jax = lambda x: jnp.tanh(x) * 3.0
    inner_tf = jax2tf_native.convert(inner_jax)
    middle_jax = lambda x: jnp.sum(jnp.exp(
        jax2tf.call_tf(inner_tf, call_tf_graph=call_tf_graph)(x * 0.5)))
    reference = lambda x: jnp.sum(jnp.exp(inner_jax(x * 0.5)))
    want, want_grad = jax.value_and_grad(reference)(X)
    got, got_grad = jax.value_and_grad(middle_jax)(X)    # JAX -> TF -> JAX, for the record
    np.testing.assert_allclose(got, want, rtol=1e-6)
    outer = jax2tf_native.convert(middle_jax)
    _assert_value_and_grad_eager_and_in_tf_function(outer, want, want_grad)


def test_serialized_module_with_call_tf_graph_is_refused_clearly():
    exported = jax.export.export(jax.jit(_jax_fun(False)))(X)
    # The inlined form carries its TF function as StableHLO: it runs from the bytes alone.
    np.testing.assert_allclose(jax2tf_native.call_exported(exported.serialize())(X).numpy(),
                               _jax_fun(False)(X), rtol=1e-6)
    from jax2tf_native import _jax_internals
    with _jax_internals.collecting_call_tf_functions():
        graph_exported = jax.export.export(jax.jit(_jax_fun(True)))(X)
    with pytest.raises(ExportedModuleError, match="call_tf_graph=True.*Fix"):
        jax2tf_native.call_exported(graph_exported)(X)


def test_saved_model_reloaded_into_jax_and_converted_again(tmp_path):
    """JAX -> SavedModel (ours) -> reloaded and called from JAX with call_tf -> converted to TF
    again: values and gradients equal the original JAX function's at every step."""
    f = lambda x: jnp.sum(jnp.tanh(x) * x)
    module = tf.Module()
    module.f = tf.function(jax2tf_native.convert(f), autograph=False,
                           input_signature=[tf.TensorSpec(X.shape, tf.float32)])
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    f_again = lambda x: jax2tf.call_tf(restored.f)(x) * 2.0
    want, want_grad = jax.value_and_grad(lambda x: f(x) * 2.0)(X)
    got, got_grad = jax.value_and_grad(f_again)(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-6)
    f_tf = jax2tf_native.convert(f_again)
    y, (g,) = tf.function(lambda x: tape_value_and_gradients(f_tf, x), autograph=False)(X)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), want_grad, rtol=1e-5, atol=1e-6)


def test_ordered_call_tf_graph_runs():
    """call_tf(..., ordered=True) needs call_tf_graph=True (jax2tf's own rule); its module
    threads an ordered-effect token, which the op runs as well."""
    f = lambda x: jnp.sin(jax2tf.call_tf(lambda t: t * 2.0, ordered=True,
                                         call_tf_graph=True)(x))
    want = np.sin(X * 2.0)
    f_tf = jax2tf_native.convert(f)
    np.testing.assert_allclose(f_tf(X).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(tf.function(f_tf, autograph=False)(X).numpy(), want, rtol=1e-6)
