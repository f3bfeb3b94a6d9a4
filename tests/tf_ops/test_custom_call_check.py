"""`find_custom_calls` finds every custom call (nested functions and regions too), and
`check_custom_calls` rejects exactly what TF cannot run, with locations and the override."""
from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jax2tf_native import linalg_portable
from tf_ops import custom_call_check as check
from tf_ops.custom_call_allowlist import ALLOWLIST_BY_TARGET

THIS_FILE = os.path.basename(__file__)
F32_3x3 = jax.ShapeDtypeStruct((3, 3), np.float32)
I32 = jax.ShapeDtypeStruct((), np.int32)
custom_call = jax.export.DisabledSafetyCheck.custom_call


def _targets_in_text(exported: jax.export.Exported) -> list[str]:
    """JAX's own printout of the module, as an independent count of the custom calls."""
    return re.findall(r"stablehlo\.custom_call @([\w.$]+)", exported.mlir_module())


def _sites(exported: jax.export.Exported) -> list[check.CustomCallSite]:
    with jax.interpreters.mlir.make_ir_context():
        module = jax.extend.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        return check.find_custom_calls(module)


def _check(exported: jax.export.Exported, platforms=None, disabled_checks=()):
    with jax.interpreters.mlir.make_ir_context():
        module = jax.extend.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        check.check_custom_calls(module, platforms=platforms or exported.platforms,
                                 disabled_checks=disabled_checks)


def _qr_r(a):
    return jnp.linalg.qr(a)[1]


def _nested_qr(a, n):
    # LAPACK QR inside a nested jit, inside a cond branch, inside a while body.
    def body(i, acc):
        return lax.cond(i % 2 == 0, jax.jit(_qr_r), lambda x: x, acc)
    return lax.fori_loop(0, n, body, a), jnp.linalg.cholesky(a @ a.T + 3 * jnp.eye(3))


@pytest.fixture(scope="module")
def nested_lapack():
    return jax.export.export(jax.jit(_nested_qr), platforms=("cpu",))(F32_3x3, I32)


def test_disabled_safety_check_semantics_we_rely_on():
    # We compare DisabledSafetyCheck values by is_custom_call(); pin how JAX builds them.
    dc = custom_call("lapack_sgeqrf_ffi")
    assert dc == custom_call("lapack_sgeqrf_ffi")
    assert dc != custom_call("Qr")
    assert str(dc) == "custom_call:lapack_sgeqrf_ffi"
    assert dc.is_custom_call() == "lapack_sgeqrf_ffi"
    assert jax.export.DisabledSafetyCheck.platform().is_custom_call() is None


def test_finds_calls_in_nested_functions_and_regions(nested_lapack):
    sites = _sites(nested_lapack)
    assert sorted(s.target for s in sites) == sorted(_targets_in_text(nested_lapack))
    assert sorted(s.target for s in sites) == [
        "lapack_sgeqrf_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi"]
    qr_sites = [s for s in sites if s.target == "lapack_sgeqrf_ffi"]
    # JAX lowers jnp.linalg.qr into a private function; the site must still lead to our line.
    assert qr_sites[0].function != "main"
    assert THIS_FILE in qr_sites[0].location, qr_sites[0].location
    chol = [s for s in sites if s.target == "lapack_spotrf_ffi"][0]
    assert THIS_FILE in chol.location, chol.location


def test_lapack_rejected_on_cpu_with_location_reason_and_fix(nested_lapack):
    with pytest.raises(check.CustomCallNotAllowedError) as info:
        _check(nested_lapack)
    error = info.value
    assert isinstance(error, ValueError)
    assert [r.target for r in error.rejected] == [
        "lapack_sgeqrf_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi"]
    message = str(error)
    for target in ("lapack_sgeqrf_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi"):
        assert f"'{target}'" in message
        assert f"jax.export.DisabledSafetyCheck.custom_call('{target}')" in message
    assert "cannot execute it on cpu" in message
    assert "jnp.linalg.qr" in message  # what emitted it
    assert THIS_FILE in message  # where


def test_disabled_checks_let_targets_through(nested_lapack):
    with pytest.raises(check.CustomCallNotAllowedError) as info:
        _check(nested_lapack, disabled_checks=[custom_call("lapack_sgeqrf_ffi"),
                                               custom_call("lapack_sorgqr_ffi")])
    assert [r.target for r in info.value.rejected] == ["lapack_spotrf_ffi"]
    _check(nested_lapack, disabled_checks=[
        custom_call(t) for t in ("lapack_sgeqrf_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi")])
    _check(nested_lapack, disabled_checks=[custom_call("ALL")])
    # A platform override is not a custom-call override.
    with pytest.raises(check.CustomCallNotAllowedError):
        _check(nested_lapack, disabled_checks=[jax.export.DisabledSafetyCheck.platform()])


def test_target_not_on_list_rejected():
    def f(x):
        return jax.ffi.ffi_call("my_unlisted_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    # jax.export enforces its own list first; the user told it to let this one through.
    exported = jax.export.export(jax.jit(f), platforms=("cpu",),
                                 disabled_checks=[custom_call("my_unlisted_kernel")])(F32_3x3)
    assert "my_unlisted_kernel" not in ALLOWLIST_BY_TARGET
    with pytest.raises(check.CustomCallNotAllowedError) as info:
        _check(exported)
    assert "'my_unlisted_kernel': not on the allowlist" in str(info.value)
    assert THIS_FILE in str(info.value)
    _check(exported, disabled_checks=[custom_call("my_unlisted_kernel")])


def test_portable_qr_allowed_on_cpu_not_on_cuda():
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(jnp.linalg.qr), platforms=("cpu",),
                                     **extra)(F32_3x3)
    assert sorted(set(_targets_in_text(exported))) == [
        "ProductOfElementaryHouseholderReflectors", "Qr"]
    _check(exported)
    with pytest.raises(check.CustomCallNotAllowedError, match="cannot execute it on cuda"):
        _check(exported, platforms=("cuda",))


def test_platform_independent_targets_allowed():
    b, = jax.export.symbolic_shape("b")
    exported = jax.export.export(jax.jit(lambda x: lax.top_k(x, x.shape[0] // 2)),
                                 platforms=("cpu",))(jax.ShapeDtypeStruct((b,), np.float32))
    assert set(_targets_in_text(exported)) == {"shape_assertion", "stablehlo.dynamic_top_k"}
    _check(exported)
    _check(exported, platforms=("cpu", "cuda", "tpu"))


def test_multi_platform_module_checks_each_target_on_its_platform():
    # In a cpu+tpu module the LAPACK call sits in the CPU branch: it fails for cpu only.
    assert check.rejection_reason("lapack_sgeqrf_ffi", ["cpu", "tpu"]).endswith(
        ALLOWLIST_BY_TARGET["lapack_sgeqrf_ffi"].note)
    assert "on cpu." in check.rejection_reason("lapack_sgeqrf_ffi", ["cpu", "tpu"])
    assert check.rejection_reason("Qr", ["cpu", "tpu"]) is None
    assert "on cuda." in check.rejection_reason("cusolver_geqrf_ffi", ["cpu", "cuda"])


def test_bad_arguments_rejected(nested_lapack):
    with pytest.raises(ValueError, match="platforms must be a non-empty subset"):
        _check(nested_lapack, platforms=("gpuu",))
    with pytest.raises(TypeError, match="DisabledSafetyCheck"):
        _check(nested_lapack, disabled_checks=["custom_call:lapack_sgeqrf_ffi"])
