"""geqp3: column-pivoted Householder QR, LAPACK ?geqp3's algorithm in JAX.

JAX's CPU lowering calls LAPACK ``?geqp3``. This follows ``?geqp3`` + ``?laqp2`` step for
step: columns marked in ``jpvt`` (non-zero) are moved to the front and factored first; then
each step takes the free column of largest partial norm (the first one on ties, as
``i?amax``), and partial norms are downdated with LAPACK's formula and recomputed when
cancellation makes the downdate unreliable (``tol3z = sqrt(eps)``). So the pivots, the
reflectors and the taus are LAPACK's. ``jpvt`` comes back 1-based, as LAPACK returns it.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import mlir

from jax2tf_native.linalg.common import HIGHEST, batched, min_dim
from jax2tf_native.linalg.householder import larfg


def _column_norms(a, rows, start):
    real_dtype = jnp.finfo(a.dtype).dtype
    return jnp.sqrt(jnp.sum(jnp.where(rows[:, None] >= start, jnp.abs(a) ** 2, 0),
                            axis=0)).astype(real_dtype)


def _swap_columns(x, i, j):
    ci = lax.dynamic_index_in_dim(x, i, axis=-1, keepdims=False)
    cj = lax.dynamic_index_in_dim(x, j, axis=-1, keepdims=False)
    x = lax.dynamic_update_index_in_dim(x, cj[..., None], i, axis=-1)
    return lax.dynamic_update_index_in_dim(x, ci[..., None], j, axis=-1)


def _fixed_columns_first(a, jpvt):
    """?geqp3's first pass: columns with jpvt != 0 move to the front, in LAPACK's order."""
    n = a.shape[-1]

    def step(j, state):
        a, jpvt, out, nfxd = state
        fixed = jpvt[j] != 0
        move = fixed & (j != nfxd)
        a = jnp.where(move, _swap_columns(a, j, nfxd), a)
        out_moved = out.at[j].set(out[nfxd]).at[nfxd].set(j + 1)
        out = jnp.where(move, out_moved, out.at[j].set(j + 1))
        return a, jpvt, out, nfxd + fixed.astype(np.int32)

    a, _, out, nfxd = lax.fori_loop(
        0, n, step, (a, jpvt, jnp.zeros((n,), jpvt.dtype), jnp.zeros((), np.int32)))
    return a, out, nfxd


def _geqp3_2d(a, jpvt):
    m, n = a.shape
    k = min_dim(m, n)
    rows = lax.iota(np.int32, m)
    cols = lax.iota(np.int32, n)
    tol3z = float(np.sqrt(np.finfo(jnp.finfo(a.dtype).dtype).eps))
    a, jpvt, nfxd = _fixed_columns_first(a, jpvt)

    def step(i, state):
        a, jpvt, taus, vn1, vn2 = state
        # The free columns' norms are computed once the fixed ones are factored.
        fresh = _column_norms(a, rows, i)
        start = i == nfxd
        vn1 = jnp.where(start, fresh, vn1)
        vn2 = jnp.where(start, fresh, vn2)
        free = i >= nfxd
        pvt = jnp.where(free, jnp.argmax(jnp.where(cols >= i, vn1, -1)).astype(np.int32), i)
        a = _swap_columns(a, i, pvt)
        jpvt = _swap_columns(jpvt, i, pvt)
        vn1 = vn1.at[pvt].set(vn1[i])
        vn2 = vn2.at[pvt].set(vn2[i])
        col = lax.dynamic_index_in_dim(a, i, axis=1, keepdims=False)
        beta, tau, x = larfg(col[i], jnp.where(rows > i, col, 0))
        v = jnp.where(rows > i, x, jnp.where(rows == i, 1, 0)).astype(a.dtype)
        # A(i:, i+1:) := H^H A(i:, i+1:), H^H = I - conj(tau) v v^H.
        vha = jnp.matmul(jnp.conj(v), a, precision=HIGHEST)
        update = jnp.conj(tau) * v[:, None] * vha[None, :]
        a = a - jnp.where(cols[None, :] > i, update, 0)
        new_col = jnp.where(rows > i, x, jnp.where(rows == i, beta.astype(a.dtype), col))
        a = lax.dynamic_update_index_in_dim(a, new_col[:, None], i, axis=1)
        taus = taus.at[i].set(tau)
        # ?laqp2's partial-norm downdate, with recomputation on cancellation.
        row_i = jnp.abs(lax.dynamic_index_in_dim(a, i, axis=0, keepdims=False))
        safe_vn1 = jnp.where(vn1 != 0, vn1, 1)
        temp = jnp.maximum(1 - (row_i / safe_vn1) ** 2, 0)
        temp2 = temp * (vn1 / jnp.where(vn2 != 0, vn2, 1)) ** 2
        recompute = temp2 <= tol3z
        below = jnp.where(i + 1 < m, _column_norms(a, rows, i + 1), 0)
        downdated = jnp.where(recompute, below, vn1 * jnp.sqrt(temp))
        active = free & (cols > i) & (vn1 != 0)
        vn1 = jnp.where(active, downdated, vn1)
        vn2 = jnp.where(active & recompute, below, vn2)
        return a, jpvt, taus, vn1, vn2

    real_dtype = jnp.finfo(a.dtype).dtype
    zeros = jnp.zeros((n,), real_dtype)
    a, jpvt, taus, _, _ = lax.fori_loop(
        0, k, step, (a, jpvt, jnp.zeros((k,), a.dtype), zeros, zeros))
    return a, jpvt, taus


def geqp3(a, jpvt):
    """LAPACK ?geqp3 on a batch: (a with R and reflectors, 1-based jpvt, taus)."""
    return batched(_geqp3_2d, a.ndim - 2)(a, jpvt)


def _geqp3_rule(ctx, a, jpvt, **_):
    return mlir.lower_fun(geqp3, multiple_results=True)(ctx, a, jpvt)
