"""Drop-in to the letter (issue 29): where jax2tf raises, ours raises an instance of the same
exception class with jax2tf's key phrase in the message, then our argument path, expected vs
got and the fix. Each case runs the peer (`jax.experimental.jax2tf`) and ours side by side."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native
from jax2tf_native import errors

f32 = lambda *shape: np.ones(shape, np.float32)
PEER, OURS = jax2tf, jax2tf_native


def _raised(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value


def _tape_gradient(f):
    x = tf.constant(f32(2))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.gradient(y, x)


def _call_tf_in_scan(J):
    b, = jax.export.symbolic_shape("b")

    def f(x):
        g = jax2tf.call_tf(lambda t: t * 2,
                           output_shape_dtype=jax.ShapeDtypeStruct((b,), np.float32))
        return jax.lax.scan(lambda c, _: (c, g(c)), x, None, length=2)[1].sum()
    return J.convert(f, polymorphic_shapes=["b"])(f32(3))


def _call_tf_declared_wrong_dimension(J):
    """call_tf whose output_shape_dtype declares b + 5 where the TF function returns b."""
    def f(x):
        declared = (5 + x.shape[0],)
        y = jax2tf.call_tf(lambda t: t,
                           output_shape_dtype=jax.ShapeDtypeStruct(declared, x.dtype))(x)
        return y + jnp.ones(declared, x.dtype)
    return J.convert(f, polymorphic_shapes=["b, ..."])(f32(4))


def _poly(fun, spec, constraints=()):
    return lambda J, *args: J.convert(fun, polymorphic_shapes=spec,
                                      polymorphic_constraints=constraints)(*args)


# name -> (call(J), the peer's exception class, its key phrase (kept verbatim by ours)).
CASES = {
    "under jax.jit": (lambda J: jax.jit(J.convert(jnp.sin))(f32(2)), ValueError,
                      "convert must be used outside all JAX transformations"),
    "under vmap, no traced argument": (
        lambda J: jax.vmap(lambda y: y + J.convert(lambda: jnp.sin(1.))())(f32(2)),
        ValueError, "convert must be used outside all JAX transformations"),
    "nested convert, no traced argument": (
        lambda J: J.convert(lambda y: y + J.convert(lambda: jnp.sin(1.))())(f32(2)),
        ValueError, "convert must be used outside all JAX transformations"),
    # The peer's own suite (issue 37): a Python float argument became a tracer in our argument
    # conversion under the trace, and JAX's TracerArrayConversionError leaked.
    "nested convert, non-tracer argument": (
        lambda J: J.convert(lambda y: y + J.convert(jnp.sin)(1.))(f32(2)),
        ValueError, "convert must be used outside all JAX transformations"),
    "under jax.jit, non-tracer argument": (
        lambda J: jax.jit(lambda y: y + J.convert(jnp.sin)(1.))(f32(2)),
        ValueError, "convert must be used outside all JAX transformations"),
    "not callable": (lambda J: J.convert(42), TypeError, "Expected a callable value, got 42"),
    "function argument": (lambda J: J.convert(lambda f, x: x)(lambda: 1, f32(2)), TypeError,
                          "is not a valid JAX type"),
    "gradient with with_gradient=False": (
        lambda J: _tape_gradient(J.convert(jnp.sin, with_gradient=False)), LookupError,
        "The jax2tf-converted function does not support gradients. Use `with_gradient` "
        "parameter to enable gradients"),
    "b = 0": (lambda J: _poly(lambda x: x * 2, ["b"])(J, np.ones((0,), np.float32)),
              tf.errors.InvalidArgumentError,
              "Input shapes do not match the polymorphic shapes specification. Expected value "
              ">= 1 for dimension variable 'b'"),
    "b = 0 in tf.function": (
        lambda J: tf.function(J.convert(lambda x: x * 2, polymorphic_shapes=["b"]),
                              autograph=False,
                              input_signature=[tf.TensorSpec([None], tf.float32)])(
            np.ones((0,), np.float32)),
        tf.errors.InvalidArgumentError, "Expected value >= 1 for dimension variable"),
    "2*b = 5": (lambda J: _poly(lambda x: x.sum(), ["2*b"])(J, f32(5)),
                tf.errors.InvalidArgumentError,
                "Input shapes do not match the polymorphic shapes specification. Division had "
                "remainder 1 when computing the value of 'b'"),
    "n = 3 and n = 4": (lambda J: _poly(lambda x, y: x.sum() + y.sum(), ["n", "n"])(
        J, f32(3), f32(4)), tf.errors.InvalidArgumentError,
        "Input shapes do not match the polymorphic shapes specification. Found inconsistency "
        "between dimension size args[1].shape[0] (= 4) and the specification 'n' (= 3)"),
    # JAX's shape-assertion texts in full, as the peer's suite matches them (issue 37).
    "b = 0 in (a + 2*b, a, a + b + c), JAX's whole text": (
        lambda J: _poly(lambda x: x.sum(), ["(a + 2*b, a, a + b + c)"])(J, f32(2, 2, 6)),
        tf.errors.InvalidArgumentError,
        "Input shapes do not match the polymorphic shapes specification. Expected value >= 1 for "
        "dimension variable 'b'. Using the following polymorphic shapes specifications: "
        "args[0].shape = (2*b + a, a, c + b + a). Obtained dimension variables: 'a' = 2 from "
        "specification 'a' for dimension args[0].shape[1] (= 2), 'b' = 0 from specification "
        "'2*b + a' for dimension args[0].shape[0] (= 2), . Please see "
        "https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more "
        "details."),
    "2*b + a = 3, JAX's whole text": (
        lambda J: _poly(lambda x: x.sum(), ["(a + 2*b, a, a + b + c)"])(J, f32(3, 2, 6)),
        tf.errors.InvalidArgumentError,
        "Input shapes do not match the polymorphic shapes specification. Division had remainder "
        "1 when computing the value of 'b'. Using the following polymorphic shapes "
        "specifications: args[0].shape = (2*b + a, a, c + b + a). Obtained dimension variables: "
        "'a' = 2 from specification 'a' for dimension args[0].shape[1] (= 2), . Please see "
        "https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more "
        "details."),
    "2*b + a = 8 and b + a = 6, JAX's whole text": (
        lambda J: _poly(lambda x: x.sum(), ["(a + 2*b, a, a + b)"])(J, f32(8, 2, 6)),
        tf.errors.InvalidArgumentError,
        "Input shapes do not match the polymorphic shapes specification. Found inconsistency "
        "between dimension size args[0].shape[0] (= 8) and the specification '2*b + a' (= 10). "
        "Using the following polymorphic shapes specifications: args[0].shape = (2*b + a, a, b "
        "+ a). Obtained dimension variables: 'a' = 2 from specification 'a' for dimension "
        "args[0].shape[1] (= 2), 'b' = 4 from specification 'b + a' for dimension "
        "args[0].shape[2] (= 6), . Please see "
        "https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more "
        "details."),
    "b * b unsolvable although the sizes disagree": (
        lambda J: _poly(lambda x: x, ["b * b, b * d * d, d"])(J, f32(4, 36, 3)), ValueError,
        "Cannot solve for values of dimension variables {'b'}. We can only solve linear "
        "uni-variate constraints."),
    "call_tf result shape differs from its declared output_shape_dtype": (
        _call_tf_declared_wrong_dimension, ValueError, "Error compiling TensorFlow function"),
    "constraint b >= 4": (lambda J: _poly(lambda x: x * 2, ["b"], ["b >= 4"])(J, f32(2)),
                          tf.errors.InvalidArgumentError,
                          "Input shapes do not match the symbolic shape constraint b >= 4"),
    "a + b unsolvable": (lambda J: _poly(lambda x: x.sum(), ["a + b"])(J, f32(3)), ValueError,
                         "Cannot solve for values of dimension variables"),
    "constant differs from the spec": (
        lambda J: _poly(lambda x: x * 2, ["(b, 3)"])(J, f32(2, 4)), ValueError,
        "syntax error in symbolic shape '(b, 3)' in dimension 1: different size 3 for known "
        "dimension"),
    "dimension unknown while tracing, no spec": (
        lambda J: tf.function(J.convert(lambda x: x), autograph=False, input_signature=[
            tf.TensorSpec([None, 3], tf.float32)]).get_concrete_function(), ValueError,
        "syntax error in symbolic shape"),
    "module for TPU called eagerly on CPU": (
        lambda J: J.convert(jnp.sin, native_serialization_platforms=("tpu",))(f32(2)),
        tf.errors.NotFoundError,
        "The current platform CPU is not among the platforms required by the module: [TPU]"),
    "unknown platform, jax2tf's keyword": (
        lambda J: J.convert(jnp.sin, native_serialization_platforms=("cpu", "bogus"))(f32(2)),
        ValueError, "native_serialization_platforms must be a sequence containing a subset of"),
    "call_tf result of dynamic shape": (
        lambda J: J.convert(lambda x: jax2tf.call_tf(lambda t: tf.boolean_mask(t, t > 0))(x),
                            polymorphic_shapes=["b"])(f32(3)),
        ValueError, "call_tf cannot call functions whose output has dynamic shape"),
    "call_tf with declared symbolic shape in lax.scan": (
        _call_tf_in_scan, ValueError, "Error compiling TensorFlow function"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_is_the_peers_class_with_its_key_phrase(name):
    call, peer_class, phrase = CASES[name]
    peer, ours = _raised(lambda: call(PEER)), _raised(lambda: call(OURS))
    assert isinstance(peer, peer_class) and phrase in str(peer), (type(peer), str(peer)[:600])
    assert isinstance(ours, peer_class), (type(ours).__mro__, str(ours)[:600])
    assert phrase in str(ours), str(ours)[:600]
    message = str(ours)
    if isinstance(ours, tf.errors.OpError) and not isinstance(ours, errors.ArgumentShapeError):
        message = ours.message  # graph mode: TF's assert op carries our message
    assert "Fix" in message or "fix" in message, message[:600]
    assert "stablehlo" not in message.split(phrase)[-1]  # no MLIR dump after the phrase


def test_our_op_errors_construct_and_pickle_as_plain_errors():
    """Ours are TF `OpError`s as well (as the peer's), built from the message alone."""
    import pickle
    for cls in (errors.ArgumentShapeError, errors.ModuleNotRunnableHereError):
        error = cls("args[0].shape[0] is 2. Fix: pass 3.")
        assert str(error) == error.message == error.args[0] == "args[0].shape[0] is 2. Fix: pass 3."
        assert error.node_def is None and error.op is None
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is cls and str(again) == str(error)
    assert errors.ArgumentShapeError("x").error_code == tf.errors.INVALID_ARGUMENT
    assert errors.ModuleNotRunnableHereError("x").error_code == tf.errors.NOT_FOUND


# --- Every error class of ours against the peer's ---------------------------------------------

# Our exception class -> (the class jax2tf raises in that situation, or the base we keep where
# jax2tf has no such situation; the key phrase kept, or None). docs/compat.md lists the same.
PEER_BASES = {
    "jax2tf_native.errors.JaxTransformationError": (ValueError, CASES["under jax.jit"][2]),
    "jax2tf_native.errors.ArgumentTypeError": (TypeError, "is not a valid JAX type"),
    "jax2tf_native.errors.ArgumentShapeError": (
        tf.errors.InvalidArgumentError,
        "Input shapes do not match the polymorphic shapes specification"),
    "jax2tf_native.errors.PolymorphicShapeError": (ValueError, "syntax error in symbolic shape"),
    "jax2tf_native.errors.CallTfShapeError": (
        ValueError, "call_tf cannot call functions whose output has dynamic shape"),
    "jax2tf_native.errors.ModuleNotRunnableHereError": (
        tf.errors.NotFoundError,
        "The current platform CPU is not among the platforms required by the module"),
    "jax2tf_native.errors.ExportedModuleError": (ValueError, None),
    "jax2tf_native.errors.GradientSpecError": (ValueError, None),
    "jax2tf_native.errors.NonPortableLinalgError": (ValueError, None),
    "jax2tf_native.grad_check.GradientCheckError": (AssertionError, None),
    "tf_ops.custom_call_check.CustomCallNotAllowedError": (ValueError, None),
    "tf_ops.tf_targets.TargetTfError": (ValueError, None),
    "tf_ops.module_verify.ModuleVerifyError": (ValueError, None),
    "saved_model_tools.verify.report.VerifyError": (RuntimeError, None),
    "saved_model_tools.cli.export.CommandError": (Exception, None),
    "saved_model_tools.inspect.report.SavedModelReadError": (ValueError, None),
    "saved_model_tools.verify.tf_envs.TfEnvError": (RuntimeError, None),
    "saved_model_tools.manifest.ManifestError": (ValueError, None),
    # jax2tf's enable_xla=False (removed in JAX 0.4.36) raised NotImplementedError("Call to
    # <primitive> cannot be converted with enable_xla=False.").
    "tf_ops.plain.errors.PlainLoweringError": (
        NotImplementedError, "cannot be converted with enable_xla=False"),
    "saved_model_tools.tfjs.convert.TfjsExportError": (ValueError, None),
}
# Signals between our own modules, caught where raised: never reach the user.
INTERNAL = {"jax2tf_native.errors.SymbolicCallTfFound",
            "jax2tf_native.vjp_functions.RematerializationRequested",
            "jax2tf_native.lapack_rewrite.adapters.NotRewritableError",
            "jax2tf_native.dim_expressions.Unknown", "jax2tf_native.dim_expressions.NonLinear",
            "saved_model_tools.write.export_fit._MissingParameter"}


def _our_exception_classes() -> dict[str, type]:
    found = {}
    for package in ("jax2tf_native", "tf_ops", "saved_model_tools"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name:
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_every_error_class_of_ours_is_an_instance_of_the_peers():
    classes = _our_exception_classes()
    assert set(classes) == set(PEER_BASES) | INTERNAL, (
        "an exception class was added or removed: give it a row in PEER_BASES (and in "
        "docs/compat.md's table) or list it as internal",
        sorted(set(classes) ^ (set(PEER_BASES) | INTERNAL)))
    for name, (base, _) in PEER_BASES.items():
        assert issubclass(classes[name], base), (name, base)
    # The drop-in cases above raise exactly these of ours.
    assert issubclass(errors.JaxTransformationError, TypeError)  # as before issue 29, too
    assert issubclass(errors.ArgumentShapeError, ValueError)
    assert issubclass(errors.ModuleNotRunnableHereError, errors.ExportedModuleError)


def test_compat_doc_lists_every_user_facing_error_class():
    import pathlib
    text = (pathlib.Path(__file__).parents[2] / "docs" / "compat.md").read_text()
    for name, (base, phrase) in PEER_BASES.items():
        row = next((l for l in text.splitlines() if l.startswith(f"| `{name.split('.')[-1]}`")),
                   None)
        assert row is not None, name
        assert base.__name__ in row, (name, row)
        if phrase is not None:
            assert phrase in row, (name, row)


# --- Keyword dimension names, gradient graph names ------------------------------------------

def test_python_keywords_are_dimension_names_as_in_the_peer():
    """Keras names unknown dimensions batch, a ... z, aa, ab, ...: the 45th is `as`, later
    ones `if` and `in`. Keras's own export of 45 inputs of (None, None, 3) runs in
    tests/jax2tf_native/test_library_callers.py (JAX's export alone takes ~10 s to solve its 46
    variables)."""
    f = lambda x: jnp.sum(x, axis=0) * 2
    spec = ["(as, if, in)"]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    signature = [tf.TensorSpec([None, None, None], tf.float32)]
    ours = tf.function(OURS.convert(f, polymorphic_shapes=spec), autograph=False,
                       input_signature=signature)
    peer = tf.function(PEER.convert(f, polymorphic_shapes=spec), autograph=False,
                       input_signature=signature)
    np.testing.assert_allclose(ours(x).numpy(), f(x))
    np.testing.assert_allclose(ours(x).numpy(), peer(x).numpy())
    with pytest.raises(tf.errors.InvalidArgumentError, match="'as'"):
        OURS.convert(lambda x, y: x.sum() + y.sum(), polymorphic_shapes=["(as, 2)", "(as, 2)"])(
            f32(3, 2), f32(4, 2))


def test_gradient_graph_names_as_the_peer():
    def names(J):
        f = J.convert(lambda x: jnp.sin(x) * 2)

        @tf.function(autograph=False)
        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            return tape.gradient(y, x)
        graph = grad.get_concrete_function(tf.TensorSpec([2], tf.float32)).graph
        return {op.name for op in graph.get_operations()} | {
            node.name for fn in graph.as_graph_def().library.function for node in fn.node_def}
    peer, ours = names(PEER), names(OURS)
    wanted = {"jax2tf_vjp/jax2tf_arg_0", "jax2tf_vjp/jax2tf_arg_1", "jax2tf_vjp/jax2tf_out"}
    assert wanted <= peer, sorted(peer)
    assert wanted <= ours, sorted(ours)


def test_gradient_graph_names_of_unwatched_inputs_as_the_peer():
    """jax2tf's VJP returns a cotangent per input, named jax2tf_vjp/jax2tf_out ... _3 for four
    inputs, also under a tape that watches three (the peer's suite: test_input_output_naming).
    Ours computes the watched inputs' cotangents only; the unwatched input's name is kept on
    zeros nothing reads, so the names match the peer's, and so do the gradients."""
    xs0, y0 = [1., 2., 3.], 4.

    def run(J, watch_y, **options):
        f = J.convert(lambda xs, y: [jnp.sin(x) * y for x in xs], **options)

        @tf.function(autograph=False)
        def u(xs, y):
            xs = [tf.convert_to_tensor(x) for x in xs]
            with tf.GradientTape() as tape:
                for t in xs + ([y] if watch_y else []):
                    tape.watch(t)
                out = f(xs, y)
            return tape.gradient(out, xs + ([y] if watch_y else []))
        graph = u.get_concrete_function(xs0, tf.constant(y0)).graph
        names = {op.name for op in graph.get_operations()
                 if op.name.startswith("jax2tf_vjp/jax2tf_")}
        return names, [g.numpy() for g in u(xs0, tf.constant(y0))]
    peer, peer_grads = run(PEER, watch_y=False)
    assert {"jax2tf_vjp/jax2tf_out_3", "jax2tf_vjp/jax2tf_arg_3"} <= peer, sorted(peer)
    for mode in ("residuals", "recompute"):
        for watch_y in (False, True):
            ours, grads = run(OURS, watch_y, gradient_mode=mode)
            assert {n for n in ours if "jax2tf_out" in n} == {
                n for n in peer if "jax2tf_out" in n}, (mode, watch_y, sorted(ours))
            assert {f"jax2tf_vjp/jax2tf_arg_{i}" for i in range(4)} <= ours, sorted(ours)
            want = [np.cos(x) * y0 for x in xs0] + ([sum(np.sin(xs0))] if watch_y else [])
            np.testing.assert_allclose(grads, want, rtol=1e-6)
    np.testing.assert_allclose(peer_grads, [np.cos(x) * y0 for x in xs0], rtol=1e-6)


def test_tape_gradient_of_a_module_for_other_platforms_deliberately_has_guard_modules():
    """The peer's suite (test_native_serialization_grad) counts 2 XlaCallModule ops in a tape
    gradient's graph of a TPU-only function: jax2tf's VJP module and its forward. Ours holds 4:
    our forward and backward modules, each after a platform guard (a tiny module asking which
    platform runs the graph), so the call fails with our message and fix -- from a TF assert op,
    InvalidArgumentError, where the peer's op raises NotFoundError (docs/compat.md, "jax2tf's
    README recipes", several platforms)."""
    x = np.arange(4, dtype=np.float32)

    def graph_and_error(J):
        f = J.convert(jnp.sin, native_serialization_platforms=("tpu",))

        @tf.function(autograph=False)
        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                return tape.gradient(f(x), x)
        ops = [op for op in grad.get_concrete_function(x).graph.get_operations()
               if op.type == "XlaCallModule"]
        return ops, _raised(lambda: grad(tf.Variable(x)))
    phrase = "The current platform CPU is not among the platforms required by the module: [TPU]"
    peer_ops, peer_error = graph_and_error(PEER)
    ours_ops, ours_error = graph_and_error(OURS)
    assert len(peer_ops) == 2 and isinstance(peer_error, tf.errors.NotFoundError)
    assert len(ours_ops) == 4 and isinstance(ours_error, tf.errors.InvalidArgumentError)
    assert phrase in str(peer_error) and phrase in str(ours_error), str(ours_error)
    # Two of ours are the guards: each module's platforms list says TPU, the guards' the host's.
    assert sum(op.get_attr("platforms") == [b"TPU"] for op in ours_ops) == 2, [
        op.get_attr("platforms") for op in ours_ops]


def test_graph_outputs_deliberately_get_the_static_sizes_of_static_inputs():
    """In a tf.function traced at inputs more specific than polymorphic_shapes, ours gives the
    outputs the sizes the module computes for them; jax2tf's XlaCallModule reports `None` (the
    peer's suite asserts those Nones: shape_poly_test.py's test_simple_binary and
    test_with_custom_vjp; docs/compat.md, "Static output shapes")."""
    def f(x, y):
        return x + jnp.sin(y)

    signature = [tf.TensorSpec([2, None], tf.float32), tf.TensorSpec([2, 3], tf.float32)]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    shapes, values = {}, {}
    for name, J in (("peer", PEER), ("ours", OURS)):
        fn = tf.function(J.convert(f, polymorphic_shapes=["_, h", "_, h"]), autograph=False,
                         input_signature=signature)
        shapes[name] = tuple(fn.get_concrete_function().output_shapes)
        values[name] = fn(x, x).numpy()
    assert shapes == {"peer": (2, None), "ours": (2, 3)}, shapes
    np.testing.assert_allclose(values["ours"], f(x, x), rtol=1e-6)
    np.testing.assert_allclose(values["ours"], values["peer"], rtol=1e-6)
    # Where TF does not know the size, ours says None as the peer does.
    unknown = tf.function(OURS.convert(f, polymorphic_shapes=["_, h", "_, h"]), autograph=False,
                          input_signature=[signature[0], signature[0]])
    assert tuple(unknown.get_concrete_function().output_shapes) == (2, None)
