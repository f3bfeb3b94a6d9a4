"""call_exported(): an Exported, or its serialized bytes, runs as a TF function."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native import errors
from tests.conftest import assert_tree_allclose


def model(params, x, *, bias):
    return {"logits": jnp.tanh(x @ params["w"]) + bias, "norm": jnp.sum(x * x, axis=1)}


def _exported(rng):
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32)}
    specs = jax.export.symbolic_args_specs((params, np.zeros((2, 4), np.float32)),
                                           (None, "b, ..."))
    exp = jax.export.export(jax.jit(model))(*specs, bias=jax.ShapeDtypeStruct((), np.float32))
    return params, exp


@pytest.mark.parametrize("form", ["exported", "bytes"])
def test_runs_exported_and_bytes_eager_and_graph(form, rng):
    params, exp = _exported(rng)
    source = exp if form == "exported" else exp.serialize()
    f_tf = jax2tf_native.call_exported(source)
    f_graph = tf.function(f_tf, autograph=False)
    for batch in (1, 5):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        want = model(params, x, bias=np.float32(0.5))
        for fn in (f_tf, f_graph):
            got = fn(params, x, bias=np.float32(0.5))
            assert_tree_allclose(jax.tree.map(lambda t: t.numpy(), got), want, rtol=1e-5,
                                 atol=1e-5)


def test_structure_mismatch(rng):
    params, exp = _exported(rng)
    f_tf = jax2tf_native.call_exported(exp)
    with pytest.raises(errors.ArgumentTypeError, match="exported for arguments structured"):
        f_tf(params, np.zeros((2, 4), np.float32))  # bias missing


def test_peer_failing_op_from_bytes(rng):
    """A serialized module with a composite (erf) runs: re-serialized for TF on load."""
    blob = jax.export.export(jax.jit(jax.lax.erf))(
        *jax.export.symbolic_args_specs((np.zeros(3, np.float32),), "b")).serialize()
    x = rng.standard_normal(6).astype(np.float32)
    assert_tree_allclose(jax2tf_native.call_exported(blob)(x).numpy(),
                         np.asarray(jax.lax.erf(x)), rtol=2e-6, atol=2e-6)


def test_without_gradient_prevents_gradient():
    exp = jax.export.export(jax.jit(jnp.sin))(np.zeros(3, np.float32))
    f_tf = jax2tf_native.call_exported(exp, with_gradient=False)
    x = tf.Variable(np.ones(3, np.float32))
    with tf.GradientTape() as tape:
        y = f_tf(x)
    np.testing.assert_allclose(y.numpy(), np.sin(np.ones(3)), rtol=1e-6)
    with pytest.raises(LookupError, match="with_gradient=True"):
        tape.gradient(y, x)


def test_portable_export_after_a_lapack_rewrite_has_no_lapack_call_only_its_locations():
    """Why `pytest --doctest-modules` once found "lapack_" in linalg/rules.py's example after
    other examples ran: JAX caches the trace of jnp.linalg's nested `_lu_solve` with the source
    locations of its first caller, here lapack_rewrite/adapters.py (call_exported's LAPACK
    rewrite). The lowering stays portable: only the module text's locations name the file."""
    from jax2tf_native import lapack_rewrite
    from jax2tf_native.linalg import rules
    from tf_ops import custom_call_check
    a, b = np.eye(3, dtype=np.float32) * 2, np.ones(3, np.float32)
    native = jax.export.export(jax.jit(jnp.linalg.solve))(a, b)
    assert "lapack_sgetrf_ffi" in lapack_rewrite.rewrite_exported(native).rewritten_targets
    portable = jax.export.export(jax.jit(jnp.linalg.inv), platforms=("cpu",),
                                 _override_lowering_rules=rules.portable_lowering_rules())(a)
    assert custom_call_check.custom_call_targets(portable) == []
    text = portable.mlir_module()
    if "lapack_" in text:  # the cached trace's locations, never a call
        assert all("lapack_rewrite" in line for line in text.splitlines() if "lapack_" in line)
