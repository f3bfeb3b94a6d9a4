"""When the LAPACK rewrite itself breaks (a bug of ours, or a module it does not expect), the
artifact is left as given and the custom-call check names each LAPACK call, its source line and
why it was not rewritten: our error with the fix, never the rewrite's own exception."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax2tf_native
from jax2tf_native.lapack_rewrite import surgery
from tf_ops.custom_call_check import CustomCallNotAllowedError


def test_an_exception_inside_the_rewrite_becomes_the_named_custom_call_error(monkeypatch):
    artifact = jax.export.export(jax.jit(jnp.linalg.cholesky))(
        jax.ShapeDtypeStruct((3, 3), np.float32))

    def broken(module, *keep):
        raise RuntimeError("surgery broke\nsecond line")

    monkeypatch.setattr(surgery, "rewrite_module", broken)
    with pytest.raises(CustomCallNotAllowedError) as info:
        jax2tf_native.call_exported(artifact)
    message = str(info.value)
    assert "'lapack_spotrf_ffi'" in message and "test_lapack_rewrite_fallback.py:" in message
    assert "the rewrite failed (RuntimeError: surgery broke)" in message
    assert "second line" not in message
    assert message.splitlines()[-1].startswith("Fix:")


def test_the_same_artifact_runs_rewritten_when_the_rewrite_works():
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
    artifact = jax.export.export(jax.jit(jnp.linalg.cholesky))(
        jax.ShapeDtypeStruct((3, 3), np.float32))
    got = jax2tf_native.call_exported(artifact)(a)
    np.testing.assert_allclose(got.numpy(), jnp.linalg.cholesky(a), rtol=1e-5)
