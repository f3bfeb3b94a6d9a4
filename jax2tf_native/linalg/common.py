"""Small helpers shared by the portable linear-algebra algorithms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

HIGHEST = lax.Precision.HIGHEST


def mT(x):
    """The conjugate transpose of the last two axes."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def eye_like(batch, rows, cols, dtype):
    """A batch of (rows, cols) identity matrices."""
    return jnp.broadcast_to(jnp.eye(rows, cols, dtype=dtype), (*batch, rows, cols))


def batched(fn, batch_ndim: int):
    """`fn` of one matrix, vmapped over `batch_ndim` leading axes."""
    for _ in range(batch_ndim):
        fn = jax.vmap(fn)
    return fn
