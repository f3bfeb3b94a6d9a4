"""Pins every JAX internal that jax2tf_native/_jax_internals.py uses.

Each test fails loudly when a JAX upgrade moves, renames or stops binding the internal, with
what to change. If JAX starts exporting one publicly, switch _jax_internals to the public name.
"""
import jax
import jax.extend.core
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

from jax2tf_native import _jax_internals


def _primitives_bound_by(fun, *args):
    """Names of all primitives in fun's jaxpr, including inside nested jaxprs (jit, etc.)."""
    found = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive)
            for param in eqn.params.values():
                for sub in (param if isinstance(param, (tuple, list)) else (param,)):
                    inner = getattr(sub, "jaxpr", None)
                    if inner is not None:
                        walk(getattr(inner, "jaxpr", inner))

    walk(jax.make_jaxpr(fun)(*args).jaxpr)
    return found


def test_geqrf_p_is_the_primitive_public_functions_bind():
    p = _jax_internals.geqrf_p
    assert isinstance(p, jax.extend.core.Primitive), type(p)
    assert p.name == "geqrf" and p.multiple_results
    a = np.zeros((4, 3), np.float32)
    for fun in (lambda a: jnp.linalg.qr(a, mode="raw"),
                lambda a: jsl.qr_multiply(a, np.zeros((2, 4), np.float32))):
        assert p in _primitives_bound_by(fun, a), (
            "JAX no longer binds jax._src.lax.linalg.geqrf_p here: update "
            "jax2tf_native/_jax_internals.py and the geqrf rule in linalg_portable")


def test_geqp3_p_is_the_primitive_pivoted_qr_multiply_binds():
    p = _jax_internals.geqp3_p
    assert isinstance(p, jax.extend.core.Primitive), type(p)
    assert p.name == "geqp3" and p.multiple_results
    a = np.zeros((4, 3), np.float32)
    fun = lambda a: jsl.qr_multiply(a, np.zeros((2, 4), np.float32), pivoting=True)
    assert p in _primitives_bound_by(fun, a), (
        "JAX no longer binds jax._src.lax.linalg.geqp3_p here: update "
        "jax2tf_native/_jax_internals.py and the geqp3 rule in linalg_portable")


def test_geqrf_lowers_to_lapack_on_cpu_without_the_override():
    """The reason the internal is needed: without our rule the module calls LAPACK."""
    text = jax.jit(lambda a: jnp.linalg.qr(a, mode="raw")).lower(
        np.zeros((4, 3), np.float32)).as_text()
    assert "lapack_sgeqrf" in text


@pytest.mark.parametrize("primitive, fun, target", [
    (jax.lax.linalg.eigh_p, jnp.linalg.eigh, "lapack_ssyevd_ffi"),
    (jax.lax.linalg.svd_p, jnp.linalg.svd, "lapack_sgesdd_ffi")])
def test_cpu_lowering_rule_is_jax_lapack_lowering(primitive, fun, target):
    """The plain rule table (jax2tf_native.linalg.plain_rules) calls JAX's CPU rule of eigh and
    svd from an override; it must emit the LAPACK call that TF's kernels replace."""
    rule = _jax_internals.cpu_lowering_rule(primitive)
    name = _jax_internals.OVERRIDE_LOWERING_RULES_KWARG
    exported = jax.export.export(jax.jit(fun), platforms=("cpu",),
                                 **{name: ((primitive, rule),)})(np.eye(3, dtype=np.float32))
    assert f"custom_call @{target}" in exported.mlir_module(), (
        f"JAX's CPU lowering rule of {primitive} moved out of mlir._platform_specific_lowerings "
        f"or stopped emitting LAPACK: update _jax_internals.cpu_lowering_rule")


def test_export_accepts_override_lowering_rules_and_applies_them():
    import inspect
    name = _jax_internals.OVERRIDE_LOWERING_RULES_KWARG
    assert name in inspect.signature(jax.export.export).parameters, (
        f"jax.export.export lost its {name} keyword: linalg_portable needs another way to "
        f"override lowering rules for one export")
    from jax.interpreters import mlir
    rule = mlir.lower_fun(lambda x, **params: x * 3.0, multiple_results=False)
    exported = jax.export.export(jax.jit(jnp.sin), **{name: ((jax.lax.sin_p, rule),)})(
        np.zeros(2, np.float32))
    np.testing.assert_allclose(exported.call(np.ones(2, np.float32)), [3.0, 3.0])
    # Nothing leaked into ordinary JAX.
    np.testing.assert_allclose(jnp.sin(np.ones(2, np.float32)), np.sin(np.ones(2)), rtol=1e-6)


def test_call_tf_function_list_state_is_where_call_tf_graph_looks():
    """call_tf(..., call_tf_graph=True) appends to the peer's thread-local list while lowering
    and refuses when it is None; our scope must be that list."""
    import tensorflow as tf
    from jax.experimental import jax2tf

    f = lambda x: jax2tf.call_tf(lambda t: t * 2.0, call_tf_graph=True)(x)
    x = np.ones(3, np.float32)
    try:
        jax.export.export(jax.jit(lambda x: f(x) + 0.0))(x)
    except ValueError as e:
        assert "only support exporting by jax2tf.convert" in str(e)
    else:
        raise AssertionError("call_tf_graph lowered without the list: the peer changed; "
                             "revisit _jax_internals.collecting_call_tf_functions")
    with _jax_internals.collecting_call_tf_functions() as functions:
        jax.export.export(jax.jit(lambda x: f(x) + 1.0))(x)
    assert len(functions) == 1 and isinstance(functions[0], tf.types.experimental.ConcreteFunction)
    peer = __import__(_jax_internals.CALL_TF_PEER_MODULE, fromlist=["_"])
    assert peer._thread_local_state.call_tf_concrete_function_list is None  # restored


def test_jit_declared_shardings_reads_in_and_out_shardings_of_a_traced_jit():
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    x = jax.ShapeDtypeStruct((4,), np.float32)
    jitted = jax.jit(lambda a, b: (a + b, a), in_shardings=(spec, None), out_shardings=(None, spec))
    ins, outs = _jax_internals.jit_declared_shardings(jitted.trace(x, x))
    assert ins == (spec, None) and outs == (None, spec), (
        "JAX moved the declared shardings of Traced._params; update _jax_internals")
    assert _jax_internals.jit_declared_shardings(jax.jit(jnp.sin).trace(x)) == ((None,), (None,))


def test_named_sharding_to_hlo_matches_the_export_record():
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "x"))
    hlo = _jax_internals.named_sharding_to_hlo(spec, 2)
    # On a 1-device mesh every spec is replicated; the multi-device forms are compared with
    # JAX's lowering in tests/jax2tf_native/test_sharded.py.
    assert str(hlo) == "{replicated}" and hlo.is_replicated()


def test_exported_with_module_keeps_fields_and_transforms_the_vjp():
    exp = jax.export.export(jax.jit(jnp.sin))(np.zeros(3, np.float32))
    blob = jax.export.deserialize(exp.serialize(vjp_order=1))
    other = jax.export.export(jax.jit(jnp.cos))(np.zeros(3, np.float32))
    seen = []
    new = _jax_internals.exported_with_module(
        blob, other.mlir_module_serialized, lambda vjp: seen.append(vjp) or vjp)
    assert new.mlir_module_serialized == other.mlir_module_serialized, (
        "dataclasses.replace(Exported, mlir_module_serialized=...) no longer sets the module: "
        "update _jax_internals.exported_with_module")
    assert (new.in_avals, new.out_avals, new.calling_convention_version) == (
        blob.in_avals, blob.out_avals, blob.calling_convention_version)
    np.testing.assert_allclose(new.call(np.ones(3, np.float32)), np.cos(np.ones(3)), rtol=1e-6)
    assert new.has_vjp() and new.vjp() is seen[0], (
        "Exported.vjp() no longer calls the `_get_vjp` field: update "
        "_jax_internals.exported_with_module")


def test_call_tf_abstract_eval_resolver_sets_the_results_shapes():
    """call_tf's primitive sits in jax.experimental.jax2tf.call_tf, its abstract evaluation is
    the `abstract_eval` attribute, takes `output_avals` (what output_shape_dtype passes), and
    refuses dynamic result shapes by itself; the resolver scope changes only that."""
    import tensorflow as tf
    from jax.experimental import jax2tf

    primitive = _jax_internals.call_tf_primitive()
    assert isinstance(primitive, jax.extend.core.Primitive) and primitive.name == "call_tf"
    b, = jax.export.symbolic_shape("b")
    x = jax.ShapeDtypeStruct((b, 3), np.float32)
    f = lambda x: jax2tf.call_tf(tf.math.cos)(x)
    # If this stops raising, the peer's call_tf gives dynamic result shapes itself: revisit
    # _jax_internals.resolving_call_tf_output_avals and call_tf_split.
    with pytest.raises(ValueError, match="output has dynamic shape"):
        jax.make_jaxpr(f)(x)
    seen = []

    def resolver(avals, params):
        seen.append(sorted(params))
        return (jax.core.ShapedArray((avals[0].shape[0], 3), np.float32),)

    with _jax_internals.resolving_call_tf_output_avals(resolver):
        jaxpr = jax.make_jaxpr(f)(x)
    assert str(jaxpr.out_avals[0].shape) == "(b, 3)"
    assert {"function_flat_tf", "callable_flat_tf", "args_flat_sig_tf",
            "output_avals"} <= set(seen[0])
    call = jaxpr.jaxpr.eqns[0].params["call_jaxpr"].jaxpr.eqns[0]  # inside call_tf's custom_vjp
    assert call.primitive is primitive and callable(call.params["callable_flat_tf"])
    assert _jax_internals.call_tf_user_function(call.params) is tf.math.cos
    treedef = _jax_internals.call_tf_args_treedef(call.params)
    assert treedef == jax.tree_util.tree_structure((0,))  # the call's (x,)
    with pytest.raises(ValueError, match="output has dynamic shape"):
        jax.make_jaxpr(f)(x)  # outside the scope the peer's own evaluation is back


def test_dimension_variables_and_evaluation():
    a, b = jax.export.symbolic_shape("a, b")
    assert _jax_internals.dimension_variables(2 * a + b + 1) == {"a", "b"}
    assert _jax_internals.dimension_variables(3) == set()
    assert _jax_internals.evaluate_dimension(2 * a + b + 1, {"a": 5, "b": 7}) == 18
    assert _jax_internals.evaluate_dimension(4, {}) == 4


def test_call_tf_params_and_bind_equation():
    """A call_tf equation's parameters hold the TF function, its flat argument signature and
    the declared result avals under these names; binding one equation as eval_jaxpr does gives
    the equation's own results."""
    import tensorflow as tf
    from jax.experimental import jax2tf

    declared = jax.ShapeDtypeStruct((3,), np.float32)
    f = lambda x: jax2tf.call_tf(tf.math.cos, output_shape_dtype=declared)(x)
    jaxpr = jax.make_jaxpr(f)(np.zeros(3, np.float32))
    call = jaxpr.jaxpr.eqns[0].params["call_jaxpr"].jaxpr.eqns[0]  # inside call_tf's custom_vjp
    params = _jax_internals.call_tf_params(call.params)
    x = np.array([0.0, 1.0, 2.0], np.float32)
    np.testing.assert_allclose(params.callable_flat_tf(tf.constant(x))[0].numpy(), np.cos(x))
    np.testing.assert_allclose(params.function_flat_tf(tf.constant(x))[0].numpy(), np.cos(x))
    assert [(tuple(s.shape), s.dtype) for s in params.args_signature] == [((3,), tf.float32)]
    assert [(a.shape, a.dtype) for a in params.output_avals] == [((3,), np.float32)]

    sin_eqn = jax.make_jaxpr(lambda v: jnp.sin(v) * 2.0)(x).jaxpr.eqns[0]
    out, = _jax_internals.bind_equation(sin_eqn, [x])
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    pair = jax.make_jaxpr(lambda v: jax.lax.sort((v, -v), num_keys=1))(x).jaxpr.eqns[1]
    got = _jax_internals.bind_equation(pair, [x[::-1], -x[::-1]])
    np.testing.assert_allclose(got[0], x), np.testing.assert_allclose(got[1], -x)


def test_inside_jax_transformation_reads_jax_trace_state_as_jax2tf_does():
    """jax2tf's convert checks `core.trace_state_clean()` (and its call_tf flag); so do we."""
    from jax._src import core
    assert callable(core.trace_state_clean), "jax._src.core.trace_state_clean moved"
    seen = []
    assert not _jax_internals.inside_jax_transformation()
    jax.vmap(lambda y: seen.append(_jax_internals.inside_jax_transformation()) or y)(np.ones(2))
    jax.jit(lambda y: seen.append(_jax_internals.inside_jax_transformation()) or y)(np.ones(2))
    with _jax_internals.tf_called_from_jax():
        jax.jit(lambda y: seen.append(_jax_internals.inside_jax_transformation()) or y)(
            np.ones(3))
    assert seen == [True, True, False], seen
    from jax.experimental.jax2tf import jax2tf as peer
    assert peer.__name__ == _jax_internals.CALL_TF_PEER_MODULE
    assert hasattr(peer._thread_local_state, "inside_call_tf"), (
        "jax2tf's _thread_local_state.inside_call_tf moved: converted functions called by "
        "call_tf's TF code while JAX traces would be refused")
    with peer.inside_call_tf():
        jax.jit(lambda y: seen.append(_jax_internals.inside_jax_transformation()) or y)(
            np.ones(4))
    assert seen[-1] is False


def test_shape_assertion_texts_are_what_jax_raises_for_the_same_shapes():
    """`jax._src.export.shape_poly.solve_dim_vars` and `ShapeConstraints.check_statically` give
    the texts of JAX's own shape assertions (what an `Exported` raises for arguments of wrong
    shapes); the peer's users match on them in full."""
    specs = jax.export.symbolic_args_specs([np.zeros((2, 2, 6), np.float32)],
                                           ["(a + 2*b, a, a + b + c)"])
    exported = jax.export.export(jax.jit(lambda x: x.sum()))(*specs)
    for shape in [(2, 2, 6), (3, 2, 6), (9, 2, 6)]:
        with pytest.raises(ValueError) as info:
            exported.call(np.zeros(shape, np.float32))
        assert _jax_internals.jax_shape_assertion_message(specs, [shape]) == str(info.value), (
            "JAX's shape-assertion text moved: update jax_shape_assertion_message in "
            "jax2tf_native/_jax_internals.py")
    assert _jax_internals.jax_shape_assertion_message(specs, [(8, 2, 7)]) is None
    assert _jax_internals.jax_dimension_sizes(specs, [(8, 2, 7)], [specs[0].shape]) == [
        [8, 2, 7]]
    unsolvable = jax.export.symbolic_args_specs([np.zeros((4, 36, 3), np.float32)],
                                                ["b * b, b * d * d, d"])
    with pytest.raises(ValueError) as info:
        jax.export.export(jax.jit(lambda x: x))(*unsolvable)
    assert _jax_internals.jax_unsolvable_message(unsolvable) == str(info.value)
    assert _jax_internals.jax_unsolvable_message(specs) is None
