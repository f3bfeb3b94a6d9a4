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
    taus = jax.ShapeDtypeStruct((*batch, min(m, n)), a.dtype)
    return jax.ffi.ffi_call(
        "Qr", (jax.ShapeDtypeStruct(a.shape, a.dtype), taus),
        custom_call_api_version=1)(a)




def _qr_impl(a, *, full_matrices, pivoting=False):
    *batch, m, n = a.shape
    k = m if full_matrices else min_dim(m, n)
    if m == 0 or n == 0:
        q, r = eye_like(batch, m, k, a.dtype), jnp.zeros((*batch, k, n), a.dtype)
        return (q, r, jnp.zeros((*batch, n), np.int32)) if pivoting else (q, r)
    if pivoting:
        r, p, taus = geqp3(a, jnp.zeros((*batch, n), np.int32))
        p = p - 1  # LAPACK's 1-based pivots, 0-based as JAX's qr returns them
    else:
        r, taus = _geqrf(a)
    if m < n:
        q = lax.linalg.householder_product(r[..., :m, :m], taus)
    elif full_matrices:
        pads = [(0, 0, 0)] * (len(batch) + 1) + [(0, m - n, 0)]
        q = lax.linalg.householder_product(lax.pad(r, jnp.zeros((), r.dtype), pads),
                                           taus)
    else:
        q = lax.linalg.householder_product(r, taus)
        r = r[..., :n, :n]
    return (q, jnp.triu(r), p) if pivoting else (q, jnp.triu(r))


def _qr_rule(ctx, a, *, pivoting, full_matrices, **_):
    impl = functools.partial(_qr_impl, full_matrices=full_matrices, pivoting=pivoting)
    return lower_symbolic(
        ctx, "qr", lambda: mlir.lower_fun(impl, multiple_results=True)(ctx, a))


def _ormqr_impl(a, taus, c, *, left, transpose):
    # Q @ C through an explicit Q: one householder_product plus one matmul.
    *batch, m, _ = a.shape
    k = taus.shape[-1]
    reflectors = a[..., :, :k]
    # An m x m matrix of reflectors (concatenate also takes a symbolic m - k).
    square = jnp.concatenate([reflectors, jnp.zeros((*batch, m, m - k), a.dtype)], axis=-1)
    q = lax.linalg.householder_product(square, taus)
    if transpose:
        q = jnp.conj(jnp.swapaxes(q, -1, -2))
    return (jnp.matmul(q, c, precision=HIGHEST) if left
            else jnp.matmul(c, q, precision=HIGHEST))


def _ormqr_rule(ctx, a, taus, c, *, left, transpose):
    impl = functools.partial(_ormqr_impl, left=left, transpose=transpose)
    return lower_symbolic(
        ctx, "ormqr", lambda: mlir.lower_fun(impl, multiple_results=False)(ctx, a, taus, c))

