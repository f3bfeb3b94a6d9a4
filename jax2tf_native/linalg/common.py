"""Small helpers shared by the portable linear-algebra algorithms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

HIGHEST = lax.Precision.HIGHEST


def mT(x):
    """The conjugate transpose of the last two axes."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def eye_like(batch, rows, cols, dtype):
    """A batch of (rows, cols) identity matrices."""
    return jnp.broadcast_to(jnp.eye(rows, cols, dtype=dtype), (*batch, rows, cols))


def is_static(dim) -> bool:
    """Whether an array dimension is a concrete int (not a symbolic dimension)."""
    return isinstance(dim, (int, np.integer))


def min_dim(a, b):
    """min of two dimensions, concrete or symbolic (jax.export's symbolic min)."""
    if is_static(a) and is_static(b):
        return min(a, b)
    # A symbolic dimension's own min (public methods of jax.export's dimension objects).
    return a.min(b) if not is_static(a) else b.rmin(a)


def max_dim(a, b):
    """max of two dimensions, concrete or symbolic (jax.export's symbolic max)."""
    if is_static(a) and is_static(b):
        return max(a, b)
    return a.max(b) if not is_static(a) else b.rmax(a)


def batched(fn, batch_ndim: int):
    """`fn` of one matrix, vmapped over `batch_ndim` leading axes."""
    for _ in range(batch_ndim):
        fn = jax.vmap(fn)
    return fn
