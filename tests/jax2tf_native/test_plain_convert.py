"""`convert(f, enable_xla=False)` and `call_exported(..., enable_xla=False)`: the exported
modules (and their VJPs) run as ordinary TF ops, eagerly and in graphs, with no XLA op in any
graph or function library, and results equal JAX's (issue 27, points 1, 3 and 5)."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native as jax2tf
from benchmarks import models
from tests.conftest import assert_tree_allclose
from tf_ops import plain

XLA_PREFIXES = ("Xla", "_Xla", "_xla")


def op_types_and_xla_attrs(concrete_function) -> tuple[set[str], set[str]]:
    """Op types of a concrete function's graph and of every function in its library (gradient
    functions included), and the XLA-asking attributes (`_XlaCompile`, ...) on any node."""
    graph_def = concrete_function.graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    attrs = {name for node in nodes for name, value in node.attr.items()
             if name.startswith(XLA_PREFIXES)
             and (value.WhichOneof("value") != "b" or value.b)}
    return {node.op for node in nodes}, attrs


def assert_no_xla(concrete_function) -> set[str]:
    types, attrs = op_types_and_xla_attrs(concrete_function)
    assert not [t for t in types if t.startswith(XLA_PREFIXES)], sorted(types)
    assert not attrs, sorted(attrs)
    return types


def model(params, inputs):
    """A pytree in (params dict, inputs dict), a pytree out: dot, elementwise, softmax."""
    hidden = jnp.tanh(inputs["x"] @ params["w"] + params["b"])
    return {"probs": jax.nn.softmax(hidden, axis=-1), "scaled": hidden * inputs["scale"]}


PARAMS = {"w": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
          "b": np.linspace(-1, 1, 4).astype(np.float32)}


def inputs(batch: int) -> dict:
    rng = np.random.default_rng(batch)
    return {"x": rng.standard_normal((batch, 3)).astype(np.float32),
            "scale": np.float32(batch)}


POLY = [None, {"x": "(b, 3)", "scale": None}]


def test_eager_graph_with_none_batch_variables_and_pytrees_equal_jax():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enable_xla=False is honoured, not ignored
        f_tf = jax2tf.convert(model, polymorphic_shapes=POLY, enable_xla=False)
    assert_tree_allclose(f_tf(PARAMS, inputs(2)), model(PARAMS, inputs(2)), rtol=1e-5)
    variables = jax.tree.map(tf.Variable, PARAMS)
    f_graph = tf.function(f_tf, autograph=False,
                          input_signature=jax2tf.input_signature([PARAMS, inputs(1)], POLY))
    concrete = f_graph.get_concrete_function()
    assert concrete.structured_input_signature[0][1]["x"].shape.as_list() == [None, 3]
    for batch in (1, 5):
        assert_tree_allclose(f_graph(variables, inputs(batch)), model(PARAMS, inputs(batch)),
                             rtol=1e-5)
    types = assert_no_xla(concrete)
    assert {"MatMul", "Tanh", "Softmax"} <= types  # what a TF engineer writes


def test_eager_calls_reuse_the_traced_plain_ops(monkeypatch):
    emitted = []
    run_program = plain.run_program
    monkeypatch.setattr(plain, "run_program", lambda *a: emitted.append(1) or run_program(*a))
    f_tf = jax2tf.convert(jnp.sin, polymorphic_shapes=["(b,)"], enable_xla=False)
    x = np.linspace(0, 1, 5, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(f_tf(x).numpy(), np.sin(x), rtol=1e-6)
    assert len(emitted) == 1  # one trace of the eager tf.function, not one emission per call
    for batch in range(1, 5):
        np.testing.assert_allclose(f_tf(x[:batch]).numpy(), np.sin(x[:batch]), rtol=1e-6)
    assert len(emitted) == 2  # one more trace, with a None batch, serves every other size


@pytest.mark.parametrize("gradient_mode", ["residuals", "recompute"])
def test_training_step_graph_and_gradient_functions_hold_no_xla(gradient_mode):
    loss = lambda p, i: jnp.sum(model(p, i)["probs"] * model(p, i)["scaled"])
    f_tf = jax2tf.convert(loss, polymorphic_shapes=POLY, enable_xla=False,
                          gradient_mode=gradient_mode)
    variables = jax.tree.map(tf.Variable, PARAMS)

    @tf.function(autograph=False,
                 input_signature=[jax2tf.input_signature([inputs(1)], POLY[1:])[0]])
    def step(batch):
        with tf.GradientTape() as tape:
            value = f_tf(variables, batch)
        return value, tape.gradient(value, variables)

    value, grads = step(inputs(3))
    want_value, want_grads = jax.value_and_grad(loss)(PARAMS, inputs(3))
    np.testing.assert_allclose(value.numpy(), want_value, rtol=1e-5)
    assert_tree_allclose(grads, want_grads, rtol=1e-4, atol=1e-6)
    assert_no_xla(step.get_concrete_function())


def test_example_model_gradients_equal_jax_grad():
    """The exported VJP lowered to plain TF ops: TF's tape gradients are jax.grad's (the
    benchmarks' MLP here; tools/plain_gradients.py measures the CNN and transformer too)."""
    loss, params, batch = (models.cross_entropy(models.mlp_apply), models.mlp_params(),
                           models.mlp_batch(4))
    f_tf = jax2tf.convert(loss, enable_xla=False)
    variables = jax.tree.map(tf.Variable, params)
    with tf.GradientTape() as tape:
        value = f_tf(variables, *batch)
    grads = tape.gradient(value, variables)
    want_value, want_grads = jax.value_and_grad(loss)(params, *batch)
    np.testing.assert_allclose(value.numpy(), want_value, rtol=1e-5)
    for key in params:  # relative to each gradient's largest entry (measured: < 1e-6)
        scale = np.max(np.abs(want_grads[key])) or 1.0
        np.testing.assert_allclose(grads[key].numpy() / scale, want_grads[key] / scale,
                                   atol=1e-5, err_msg=key)


def test_with_gradient_false_prevents_gradients():
    f_tf = jax2tf.convert(jnp.tanh, with_gradient=False, enable_xla=False)
    x = tf.constant([0.5, -1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f_tf(x)
    np.testing.assert_allclose(y.numpy(), np.tanh(x.numpy()), rtol=1e-6)
    with pytest.raises(LookupError, match="with_gradient=False"):
        tape.gradient(y, x)


def test_call_exported_artifact_runs_as_plain_ops_with_its_vjp():
    x_spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("(b, 3)"), np.float32)
    exported = jax.export.export(jax.jit(lambda p, x: jnp.sum(jnp.tanh(x @ p["w"]), axis=1)))(
        {"w": PARAMS["w"]}, x_spec)
    f_tf = jax2tf.call_exported(exported.serialize(vjp_order=1), enable_xla=False)
    p = {"w": tf.Variable(PARAMS["w"])}
    x = inputs(4)["x"]
    f_graph = tf.function(lambda x: f_tf(p, x), autograph=False,
                          input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    with tf.GradientTape() as tape:
        y = f_tf(p, x)
    want = exported.call({"w": PARAMS["w"]}, x)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(f_graph(x).numpy(), want, rtol=1e-5)
    want_grad = jax.grad(lambda w: jnp.sum(exported.call({"w": w}, x)))(PARAMS["w"])
    np.testing.assert_allclose(tape.gradient(y, p["w"]).numpy(), want_grad, rtol=1e-5)
    assert_no_xla(f_graph.get_concrete_function())


def test_refusal_names_op_dtype_and_line_at_first_call():
    def f(x):
        return jax.ffi.ffi_call("my_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1

    f_tf = jax2tf.convert(f, enable_xla=False, disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call("my_kernel")])
    with pytest.raises(jax2tf.PlainLoweringError,
                       match=r"`stablehlo.custom_call` \(f32\) at .*test_plain_convert.py:\d+"
                             r".*'my_kernel'.*enable_xla=True") as error:
        f_tf(np.ones(3, np.float32))
    assert isinstance(error.value, NotImplementedError)


def test_modules_for_several_platforms_are_refused():
    f_tf = jax2tf.convert(jnp.sin, platforms=("cpu", "cuda"), enable_xla=False)
    with pytest.raises(jax2tf.PlainLoweringError, match=r"several platforms.*platforms=\('cpu',\)"):
        f_tf(np.zeros(2, np.float32))


def test_call_tf_inlined_runs_and_call_tf_graph_is_refused():
    call_tf = jax2tf.call_tf  # jax2tf's own, imported before conversion
    tf_sin = tf.function(tf.math.sin, autograph=False)
    x = np.linspace(0, 1, 3, dtype=np.float32)
    inlined = jax2tf.convert(lambda v: call_tf(tf_sin)(v) * 2, enable_xla=False)
    np.testing.assert_allclose(inlined(x).numpy(), np.sin(x) * 2, rtol=1e-6)
    graph = jax2tf.convert(lambda v: call_tf(tf_sin, call_tf_graph=True)(v) * 2,
                           enable_xla=False)
    with pytest.raises(jax2tf.PlainLoweringError, match=r"call_tf_graph=True.*Fix: use call_tf"):
        graph(x)


def test_shape_mismatch_keeps_our_error_eagerly_and_in_graphs():
    """Shapes known when the call is made or traced are checked against the polymorphic
    shapes; a graph traced with None sizes carries no run-time assertion (TF.js's converters
    and Core ML refuse Assert ops), so there TF's ops report what does not fit."""
    f_tf = jax2tf.convert(lambda x, y: x + y, polymorphic_shapes=["(b, 3)", "(b, 3)"],
                          enable_xla=False)
    x, y = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    with pytest.raises(jax2tf.ArgumentShapeError, match=r"args\[1\].shape\[0\] = 4.*b = 2"):
        f_tf(x, y)
    traced = tf.function(f_tf, autograph=False)
    with pytest.raises(jax2tf.ArgumentShapeError, match=r"args\[1\].shape\[0\] = 4.*b = 2"):
        traced(x, y)
    spec = tf.TensorSpec([None, 3], tf.float32)
    f_graph = tf.function(f_tf, autograph=False, input_signature=[spec, spec])
    assert not {"Assert", "StringFormat"} & assert_no_xla(f_graph.get_concrete_function())
    with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):
        f_graph(x, y)


