"""What jax2tf users rely on, case by case, compared with JAX's outputs and gradients and with
the peer (jax.experimental.jax2tf) where the point is parity (issue 14)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native
from jax2tf_native.errors import JaxTransformationError
from tests.conftest import assert_tree_allclose

X = (np.arange(6, dtype=np.float32).reshape(2, 3) - 1.5) / 7


def _tape(f, *args):
    args = [tf.convert_to_tensor(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(args)
        y = f(*args)
    return y, tape.gradient(y, args)


# --- Converted functions under JAX transformations ------------------------------------------

TRANSFORMATIONS = {
    "jit": (lambda f: jax.jit(f), "jax.jit"),
    "vmap": (lambda f: jax.vmap(f), "jax.vmap"),
    "grad": (lambda f: jax.grad(lambda x: f(x).sum()), "jax.grad"),
    "nested convert": (lambda f: jax2tf_native.convert(lambda x: f(x)), "convert"),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMATIONS))
def test_converted_function_under_jax_transformation_says_what_and_the_fix(name):
    transform, mentioned = TRANSFORMATIONS[name]
    with pytest.raises(JaxTransformationError) as info:
        transform(jax2tf_native.convert(jnp.sin))(X)
    message = str(info.value)
    assert message.startswith("convert must be used outside all JAX transformations: "
                              "args[0] is a JAX tracer (float32[")
    assert mentioned in message
    assert "Fix: inside JAX code call the original JAX function" in message
    assert "call_tf" in message


def test_peer_under_jit_fails_less_clearly():
    """Pins the comparison: the peer says only that convert must be outside transformations."""
    with pytest.raises(ValueError, match="outside all JAX transformations"):
        jax.jit(jax2tf.convert(jnp.sin))(X)


# --- Pytree polymorphic_shapes with lists ---------------------------------------------------

def test_polymorphic_shapes_pytree_with_lists():
    def f(xs, ys):
        (x0, x1), (x2,) = xs
        return jnp.sin(x0) * x1 + x2 + ys["a"] * ys["b"]

    args = (([X, X * 2], [X + 1]), {"a": X - 1, "b": X * 3})
    shapes = [(["v, 3", "v, 3"], ["v, 3"]), dict(a="v, 3", b="v, 3")]
    f_tf = jax2tf_native.convert(f, polymorphic_shapes=shapes)
    peer = jax2tf.convert(f, polymorphic_shapes=shapes)
    np.testing.assert_allclose(f_tf(*args).numpy(), f(*args), rtol=1e-6)
    np.testing.assert_allclose(f_tf(*args).numpy(), peer(*args).numpy(), rtol=1e-6)
    signature = jax2tf_native.input_signature(args, shapes)
    assert signature[0][0][1].shape.as_list() == [None, 3]
    leaves = jax.tree_util.tree_leaves(args)

    def loss(*flat):
        xs, ys = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(args), flat)
        return f(xs, ys).sum()

    graph = tf.function(lambda *flat: _tape(lambda *a: tf.reduce_sum(f_tf(*jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(args), a))), *flat), autograph=False)
    bigger = [np.concatenate([l, l]) for l in leaves]
    for inputs in (leaves, bigger):
        y, grads = graph(*inputs)
        np.testing.assert_allclose(y.numpy(), loss(*inputs), rtol=1e-6)
        want = jax.grad(loss, argnums=tuple(range(len(leaves))))(*inputs)
        assert_tree_allclose([g.numpy() for g in grads], list(want), rtol=1e-5, atol=1e-6)


# --- Integer tf.Variable, persistent tape, unconnected_gradients=ZERO ----------------------

@pytest.mark.parametrize("convert", [jax2tf_native.convert, jax2tf.convert],
                         ids=["ours", "peer"])
def test_integer_variable_gradient_in_tf_function_persistent_zero(convert):
    w = tf.Variable(np.array([0.5, -1.5], np.float32))
    n = tf.Variable(np.array([2, 3], np.int32))
    f = lambda w, n: jnp.sum(w ** 2 * n.astype(jnp.float32))
    f_tf = convert(f)

    @tf.function(autograph=False)
    def grads():
        with tf.GradientTape(persistent=True) as tape:
            y = f_tf(w, n)
        zero = tape.gradient(y, [w, n], unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return zero, tape.gradient(y, [w, n])

    (gw, gn), (gw_none, gn_none) = grads()
    want = jax.grad(f)(w.numpy(), n.numpy())
    np.testing.assert_allclose(gw.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(gw_none.numpy(), want, rtol=1e-6)
    assert gn.dtype == tf.int32 and gn.numpy().tolist() == [0, 0]
    assert gn_none is None


# --- jax.checkpoint keeps its optimization barriers -----------------------------------------

def _hlo(f, *args):
    return tf.function(f, jit_compile=True, autograph=False).experimental_get_compiler_ir(
        *[tf.constant(a) for a in args])(stage="hlo")


def test_checkpoint_barriers_survive_like_the_peer():
    f = lambda x: jnp.sum(jnp.sin(jnp.sin(x)))
    g = jax.grad(jax.checkpoint(f))
    ours, peer = jax2tf_native.convert(g), jax2tf.convert(g)
    assert "opt-barrier" in _hlo(peer, X)
    assert "opt-barrier" in _hlo(ours, X)
    np.testing.assert_allclose(ours(X).numpy(), g(X), rtol=1e-6)

    def second(f_tf):
        return lambda x: _tape(lambda x: tf.reduce_sum(f_tf(x)), x)[1][0]

    assert "opt-barrier" in _hlo(second(ours), X)
    want = jax.grad(lambda x: g(x).sum())(X)
    np.testing.assert_allclose(second(ours)(tf.constant(X)).numpy(), want, rtol=1e-5, atol=1e-6)


# --- 0-size linear algebra -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 2, 2)])
@pytest.mark.parametrize("name", ["eigvals", "eig", "schur"])
def test_zero_size_non_portable_linalg_runs(name, shape):
    fun = {"eigvals": jnp.linalg.eigvals, "eig": jnp.linalg.eig,
           "schur": jax.scipy.linalg.schur}[name]
    a = np.zeros(shape, np.float32)
    got = jax2tf_native.convert(fun)(a)
    assert_tree_allclose(jax.tree.map(lambda t: t.numpy(), tuple(got) if name != "eigvals"
                                      else got),
                         jax.tree.map(np.asarray, tuple(fun(a)) if name != "eigvals"
                                      else fun(a)))


def test_non_empty_eigvals_runs_portably():
    # Portable since issue 19 (tests/jax2tf_native/linalg_isolated/nonsymmetric_checks.py has the
    # full coverage).
    a = np.array([[0.0, 1.0], [-2.0, 0.5]], np.float32)
    got = np.sort_complex(jax2tf_native.convert(jnp.linalg.eigvals)(a).numpy())
    np.testing.assert_allclose(got, np.sort_complex(np.asarray(jnp.linalg.eigvals(a))),
                               rtol=1e-6, atol=1e-6)


# --- lax.reduce with a non-identity init_value ----------------------------------------------

@pytest.mark.parametrize("gradient_mode", ["residuals", "recompute"])
def test_reduce_with_init_value_equals_jax(gradient_mode):
    y = np.arange(24, dtype=np.float32).reshape(4, 6) / 5
    f = lambda y: jax.lax.reduce(y, np.float32(3.0), jax.lax.add, (0,))
    f_tf = jax2tf_native.convert(f, gradient_mode=gradient_mode)
    want = np.asarray(jax.jit(f)(y))
    np.testing.assert_allclose(f_tf(y).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(jax2tf.convert(f)(y).numpy(), want, rtol=1e-6)
    value, (grad,) = tf.function(lambda y: _tape(lambda y: tf.reduce_sum(f_tf(y) ** 2), y),
                                 autograph=False)(y)
    np.testing.assert_allclose(value.numpy(), np.sum(want ** 2), rtol=1e-6)
    # d/dy of f is 1 wherever: TF's chain rule uses f's true value. jax.grad of the whole
    # expression would use the JVP rule's primal (without the init value), so compare with the
    # same function written with reduce_sum.
    same_f = lambda y: jnp.sum(y, axis=0) + 3.0
    np.testing.assert_allclose(grad.numpy(), jax.grad(lambda y: jnp.sum(same_f(y) ** 2))(y),
                               rtol=1e-5)
    np.testing.assert_allclose(_tape(f_tf, y)[1][0].numpy(), jax.grad(lambda y: f(y).sum())(y))


# --- Graph names -----------------------------------------------------------------------------

def _names(convert):
    f_tf = convert(lambda a, b: (a + b, a * b))
    spec = tf.TensorSpec((2, 3), tf.float32)
    graph = tf.function(f_tf, autograph=False).get_concrete_function(spec, spec).graph
    return {op.name for op in graph.get_operations()}


def test_graph_names_inputs_and_outputs_as_the_peer():
    wanted = {"jax2tf_arg_0", "jax2tf_arg_1", "jax2tf_out", "jax2tf_out_1"}
    assert wanted <= _names(jax2tf.convert)
    assert wanted <= _names(jax2tf_native.convert)


def test_premise_jax_vjp_primal_of_reduce_drops_the_init_value():
    """Why vjp_functions takes the residual forward's outputs from the function itself when it
    binds lax.reduce; when JAX fixes _reduce_jvp this fails, and the workaround can go."""
    y = np.ones((4, 6), np.float32)
    f = lambda y: jax.lax.reduce(y, np.float32(3.0), jax.lax.add, (0,))
    np.testing.assert_allclose(jax.jit(f)(y), np.full(6, 7.0))
    np.testing.assert_allclose(jax.vjp(f, y)[0], np.full(6, 4.0))


# --- jax2tf's public surface (docs/compat.md) ------------------------------------------------

def test_jax2tf_public_names_are_re_exported():
    for name in ("call_tf", "PolyShape", "eval_polymorphic_shape", "dtype_of_val"):
        assert getattr(jax2tf_native, name) is getattr(jax2tf, name), name
    assert jax2tf_native.DisabledSafetyCheck is jax2tf.DisabledSafetyCheck
    spec, poly = jax2tf_native.eval_polymorphic_shape(
        lambda a: a.T, polymorphic_shapes=["b, 3"])(X)
    assert poly == "(3, b)" and str(spec.shape) == "(3, b)"


@pytest.mark.filterwarnings("ignore:PolyShape is deprecated")
def test_poly_shape_specs_as_in_jax2tf():
    f = lambda a, c: jnp.sin(a) * c
    x4 = np.concatenate([X, X])
    for shapes in ([jax2tf.PolyShape("b", 3), jax2tf.PolyShape("b", ...)],
                   jax2tf.PolyShape("b", ...)):
        signature = jax2tf_native.input_signature([X, X], shapes)
        assert [s.shape.as_list() for s in signature] == [[None, 3], [None, 3]]
        f_tf = tf.function(jax2tf_native.convert(f, polymorphic_shapes=shapes),
                           input_signature=signature, autograph=False)
        for a in (X, x4):
            np.testing.assert_allclose(f_tf(a, a).numpy(), f(a, a), rtol=1e-6)


# enable_xla=False is not ignored: it lowers to plain TF ops
# (tests/jax2tf_native/test_plain_convert.py).
@pytest.mark.parametrize("name", ["native_serialization"])
def test_deprecated_serialization_flags_are_ignored_with_a_warning_as_jax2tf(name):
    with pytest.warns(DeprecationWarning, match=f"{name}=False is ignored.*Fix: drop"):
        f_tf = jax2tf_native.convert(jnp.sin, **{name: False})
    with pytest.warns(DeprecationWarning):
        peer = jax2tf.convert(jnp.sin, **{name: False})
    np.testing.assert_allclose(f_tf(X).numpy(), peer(X).numpy(), rtol=1e-6)


@pytest.mark.parametrize("convert", [jax2tf_native.convert, jax2tf.convert],
                         ids=["ours", "peer"])
def test_gradient_ops_are_under_jax2tf_vjp(convert):
    f_tf = convert(lambda a, b: jnp.sum(jnp.sin(a) * b))
    spec = tf.TensorSpec((2, 3), tf.float32)
    step = tf.function(lambda a, b: _tape(f_tf, a, b), autograph=False)
    graph = step.get_concrete_function(spec, spec).graph
    names = {op.name for op in graph.get_operations()}
    assert {"jax2tf_arg_0", "jax2tf_out", "jax2tf_vjp/XlaCallModule"} <= names
    y, grads = step(X, X + 1)
    want = jax.grad(lambda a, b: jnp.sum(jnp.sin(a) * b), argnums=(0, 1))(X, X + 1)
    assert_tree_allclose([g.numpy() for g in grads], list(want), rtol=1e-6)


@pytest.mark.parametrize("gradient_mode", ["residuals", "recompute"])
def test_reloaded_saved_model_persistent_tape_zero_with_integer_variable(tmp_path,
                                                                         gradient_mode):
    """The issue's case as call_tf's backward meets it: a reloaded SavedModel differentiated
    in tf.function with a persistent tape and unconnected_gradients=ZERO, an integer Variable
    among the arguments. The residual forward's outputs once had no gradient left there."""
    f = lambda w, n: jnp.sum(jnp.tanh(w) * n.astype(jnp.float32))
    module = tf.Module()
    module.n = tf.Variable(np.array([2, 3, 4], np.int32))
    f_tf = jax2tf_native.convert(f, gradient_mode=gradient_mode)
    module.f = tf.function(lambda w: f_tf(w, module.n), autograph=False,
                           input_signature=[tf.TensorSpec((3,), tf.float32)])
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    w = tf.Variable(np.array([0.1, -0.4, 0.7], np.float32))

    @tf.function(autograph=False)
    def grads():
        with tf.GradientTape(persistent=True) as tape:
            y = restored.f(w)
        return tape.gradient(y, [w, restored.n],
                             unconnected_gradients=tf.UnconnectedGradients.ZERO)

    gw, gn = grads()
    np.testing.assert_allclose(gw.numpy(), jax.grad(f)(w.numpy(), np.array([2, 3, 4])),
                               rtol=1e-6)
    assert gn.numpy().tolist() == [0, 0, 0]
