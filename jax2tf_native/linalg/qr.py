"""Householder QR (XLA's Qr / ProductOfElementaryHouseholderReflectors custom calls), ormqr."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import mlir

from jax2tf_native.linalg.common import HIGHEST, eye_like, min_dim
from jax2tf_native.linalg.errors import lower_symbolic
from jax2tf_native.linalg.qr_pivoted import geqp3

# Householder QR: XLA custom calls "Qr" and
# "ProductOfElementaryHouseholderReflectors" (api version 1, no config).

_householder_product_rule = jax.ffi.ffi_lowering(
    "ProductOfElementaryHouseholderReflectors", api_version=1,
    skip_ffi_layout_processing=True)

# geqrf is bound directly by jnp.linalg.qr(mode="raw"), slogdet(method="qr")
# and jax.scipy.linalg.qr_multiply; qr_p below calls _geqrf itself.
_geqrf_rule = jax.ffi.ffi_lowering("Qr", api_version=1,
                                   skip_ffi_layout_processing=True)


def _geqrf(a):
    """LAPACK-style geqrf: R above the diagonal, reflectors below, and taus."""
    *batch, m, n = a.shape
    taus = jax.ShapeDtypeStruct((*batch, min_dim(m, n)), a.dtype)
    return jax.ffi.ffi_call(
        "Qr", (jax.ShapeDtypeStruct(a.shape, a.dtype), taus),
        custom_call_api_version=1)(a)




def _qr_impl(a, *, full_matrices, pivoting=False):
    *batch, m, n = a.shape
    k = min_dim(m, n)  # the number of reflectors
    q_cols = m if full_matrices else k
    if m == 0 or n == 0:
        q, r = eye_like(batch, m, q_cols, a.dtype), jnp.zeros((*batch, q_cols, n), a.dtype)
        return (q, r, jnp.zeros((*batch, n), np.int32)) if pivoting else (q, r)
    if pivoting:
        r, p, taus = geqp3(a, jnp.zeros((*batch, n), np.int32))
        p = p - 1  # LAPACK's 1-based pivots, 0-based as JAX's qr returns them
    else:
        r, taus = _geqrf(a)
    # Q is the product of the k reflectors stored below R's diagonal, with m - k zero
    # columns added for the complete Q. Written in k = min(m, n) rather than by comparing
    # m with n, it needs no comparison, so m and n may be unrelated symbolic sizes
    # (where JAX's own CPU lowering stops: "'m' < 'n' is inconclusive").
    reflectors = r[..., :, :k]
    if full_matrices:
        reflectors = jnp.concatenate(
            [reflectors, jnp.zeros((*batch, m, m - k), r.dtype)], axis=-1)
    q = lax.linalg.householder_product(reflectors, taus)
    r = jnp.triu(r[..., :q_cols, :])
    return (q, r, p) if pivoting else (q, r)


def _qr_rule(ctx, a, *, pivoting, full_matrices, **_):
    impl = functools.partial(_qr_impl, full_matrices=full_matrices, pivoting=pivoting)
    return lower_symbolic(
        ctx, "qr", lambda: mlir.lower_fun(impl, multiple_results=True)(ctx, a))


def _square_reflectors_by_index(a, taus):
    """The m x m reflector matrix and m taus for a k unrelated to a's (m, n) symbolically.

    Columns and taus are gathered by index (zero past the end), so no size comparison is
    needed; reflectors k..m-1 get tau = 0 and zero vectors, i.e. the identity, which is
    LAPACK's ormqr: only the first k reflectors are applied.
    """
    m, k = a.shape[-2], taus.shape[-1]
    index = jnp.arange(m)
    used = index < jnp.asarray(k)  # sizes are values at run time
    square = jnp.take(a, index, axis=-1, mode="fill", fill_value=0)
    square = jnp.where(used, square, jnp.zeros((), a.dtype))
    taus = jnp.take(taus, index, axis=-1, mode="fill", fill_value=0)
    return square, jnp.where(used, taus, jnp.zeros((), taus.dtype))


def _ormqr_impl(a, taus, c, *, left, transpose):
    # Q @ C through an explicit Q: one householder_product plus one matmul.
    *batch, m, _ = a.shape
    k = taus.shape[-1]
    try:
        # An m x m matrix of reflectors (concatenate also takes a symbolic m - k).
        square = jnp.concatenate([a[..., :, :k], jnp.zeros((*batch, m, m - k), a.dtype)],
                                 axis=-1)
    except jax.errors.InconclusiveDimensionOperation:
        square, taus = _square_reflectors_by_index(a, taus)
    q = lax.linalg.householder_product(square, taus)
    if transpose:
        q = jnp.conj(jnp.swapaxes(q, -1, -2))
    return (jnp.matmul(q, c, precision=HIGHEST) if left
            else jnp.matmul(c, q, precision=HIGHEST))


def _ormqr_rule(ctx, a, taus, c, *, left, transpose):
    impl = functools.partial(_ormqr_impl, left=left, transpose=transpose)
    return lower_symbolic(
        ctx, "ormqr", lambda: mlir.lower_fun(impl, multiple_results=False)(ctx, a, taus, c))

