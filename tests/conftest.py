"""Shared test setup: quiet TF's C++ logs, and helpers comparing TF results with JAX."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def assert_tree_allclose(tf_tree, jax_tree, rtol=1e-6, atol=1e-6):
    """TF results equal JAX results leaf by leaf, with the same pytree structure and dtypes."""
    tf_leaves, tf_def = jax.tree_util.tree_flatten(tf_tree)
    jax_leaves, jax_def = jax.tree_util.tree_flatten(jax_tree)
    assert tf_def == jax_def, f"structure {tf_def} != {jax_def}"
    for got, want in zip(tf_leaves, jax_leaves):
        got = np.asarray(got)
        want = np.asarray(want)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
