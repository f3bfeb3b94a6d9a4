"""Householder QR (XLA's Qr / ProductOfElementaryHouseholderReflectors custom calls), ormqr."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.interpreters import mlir

from jax2tf_native.linalg.common import HIGHEST, eye_like
from jax2tf_native.linalg.errors import raise_non_portable, require_static

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




def _qr_impl(a, *, full_matrices):
    *batch, m, n = a.shape
    k = m if full_matrices else min(m, n)
    if m == 0 or n == 0:
        return eye_like(batch, m, k, a.dtype), jnp.zeros((*batch, k, n), a.dtype)
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
    return q, jnp.triu(r)


def _qr_rule(ctx, a, *, pivoting, full_matrices, **_):
    if pivoting:
        raise_non_portable(
            ctx, "qr", "column-pivoted QR (geqp3) exists only as a LAPACK/MAGMA "
            "kernel in jaxlib")
    m, n = ctx.avals_in[0].shape[-2:]
    require_static(ctx, "qr", m, n)
    return mlir.lower_fun(functools.partial(_qr_impl, full_matrices=full_matrices),
                          multiple_results=True)(ctx, a)


def _ormqr_impl(a, taus, c, *, left, transpose):
    # Q @ C through an explicit Q: one householder_product plus one matmul.
    *batch, m, _ = a.shape
    k = taus.shape[-1]
    reflectors = a[..., :, :k]
    pads = [(0, 0, 0)] * (len(batch) + 1) + [(0, m - k, 0)]
    q = lax.linalg.householder_product(
        lax.pad(reflectors, jnp.zeros((), a.dtype), pads), taus)
    if transpose:
        q = jnp.conj(jnp.swapaxes(q, -1, -2))
    return (jnp.matmul(q, c, precision=HIGHEST) if left
            else jnp.matmul(c, q, precision=HIGHEST))


def _ormqr_rule(ctx, a, taus, c, *, left, transpose):
    require_static(ctx, "ormqr", *ctx.avals_in[0].shape[-2:])
    return mlir.lower_fun(
        functools.partial(_ormqr_impl, left=left, transpose=transpose),
        multiple_results=False)(ctx, a, taus, c)

