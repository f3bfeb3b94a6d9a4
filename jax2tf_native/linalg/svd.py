"""svd: QDWH polar decomposition, then eigh of the Hermitian factor."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.interpreters import mlir

from jax2tf_native.linalg.common import HIGHEST, batched, eye_like, is_static, max_dim, min_dim
from jax2tf_native.linalg.errors import lower_symbolic

# svd: QDWH polar decomposition A = U_p H, then H = V diag(s) V^H by eigh,
# U = U_p V (Nakatsukasa & Higham 2013; JAX's TPU algorithm, public pieces).

_QDWH_MAX_ITERATIONS = 10


def _decided(compare, undecided):
    """`compare()`, or `undecided` when symbolic sizes make it inconclusive."""
    try:
        return bool(compare())
    except jax.errors.InconclusiveDimensionOperation:
        return undecided


def _svd_2d(a, *, full_matrices, compute_uv):
    m, n = a.shape
    wide = _decided(lambda: m < n, None)
    if wide is None:
        return _svd_either_orientation(a, full_matrices=full_matrices,
                                       compute_uv=compute_uv)
    if not wide:
        return _svd_tall(a, full_matrices=full_matrices, compute_uv=compute_uv)
    out = _svd_tall(jnp.conj(a.T), full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return out
    s, u, vh = out  # of A^H: A = vh^H diag(s) u^H
    return s, jnp.conj(vh.T), jnp.conj(u.T)


def _svd_tall(a, *, full_matrices, compute_uv):
    """The SVD of an m x n matrix with m >= n (m may equal n)."""
    m, n = a.shape
    q = u_null = None
    # With symbolic sizes that cannot be compared the QR step is taken: it is exact for
    # any m >= n (an empty u_null when m == n), only slower when it is not needed.
    if full_matrices and _decided(lambda: m > n, True):
        q_full, r_full = lax.linalg.qr(a, full_matrices=True)
        q, u_null, a = q_full[:, :n], q_full[:, n:], r_full[:n, :]
    elif _decided(lambda: 20 * m > 23 * n, True):  # m > 1.15 n, in integers
        # A thin QR first makes QDWH and eigh work on an n x n matrix.
        q, a = lax.linalg.qr(a, full_matrices=False)
    finite = jnp.all(jnp.isfinite(a))
    u_p, h, _, _ = lax.linalg.qdwh(a, max_iterations=_QDWH_MAX_ITERATIONS)
    h = (h + jnp.conj(h.T)) / 2
    v, s = lax.linalg.eigh(h, sort_eigenvalues=False)
    # H is positive semidefinite; round-off can make tiny eigenvalues negative.
    s = jnp.maximum(s, 0)
    order = jnp.argsort(-s)
    s = jnp.where(finite, s[order], jnp.nan)
    if not compute_uv:
        return (s,)
    v = v[:, order]
    u = jnp.matmul(u_p, v, precision=HIGHEST)

    # For (numerically) rank-deficient A the polar factor is not unitary on the
    # null space; re-orthonormalize (Nakatsukasa & Higham 2013, section 5.5).
    def reorthonormalize(u):
        u, r = lax.linalg.qr(u, full_matrices=False)
        return u * jnp.where(jnp.real(jnp.diagonal(r)) >= 0, 1, -1).astype(u.dtype)

    eps = float(jnp.finfo(a.dtype).eps)
    n_value = jnp.asarray(n).astype(s.dtype)  # (n may be a symbolic dimension)
    u = lax.cond(s[-1] <= n_value * eps * s[0], reorthonormalize, lambda u: u, u)
    if q is not None:
        u = jnp.matmul(q, u, precision=HIGHEST)
    if u_null is not None:
        u = jnp.concatenate([u, u_null], axis=1)
    nan = jnp.array(jnp.nan, u.dtype)
    u = jnp.where(finite, u, nan)
    vh = jnp.where(finite, jnp.conj(v.T), nan)
    return s, u, vh


def _fit(x, rows, cols):
    """`x` sliced or zero-padded to (rows, cols): a shape change that is the identity at
    run time, for sizes that agree at run time but are different symbolic expressions."""
    for axis, size in ((0, rows), (1, cols)):
        have = x.shape[axis]
        if _decided(lambda: size <= have, False):
            x = lax.slice_in_dim(x, 0, size, axis=axis)
        else:  # size >= have: jax.export decides it for the sizes used here
            pad = list(x.shape)
            # A static size is padded past and sliced back: concatenating exactly size - have
            # gives a static dimension from symbolic pieces, which JAX lowers to a dynamic
            # MLIR type that disagrees with the static one (a verifier error, measured).
            pad[axis] = size if is_static(size) else size - have
            x = jnp.concatenate([x, jnp.zeros(pad, x.dtype)], axis=axis)
            if is_static(size):
                x = lax.slice_in_dim(x, 0, size, axis=axis)
    return x


def _svd_either_orientation(a, *, full_matrices, compute_uv):
    """The SVD of an m x n matrix whose symbolic m and n cannot be compared.

    JAX's own CPU lowering exports this shape (LAPACK takes either orientation); the
    portable algorithm needs a tall matrix. Both orientations are written as one
    p x k matrix, p = max(m, n), k = min(m, n): A when m >= n, A^H otherwise, chosen at run
    time by a select of two copies. One SVD of it, then its factors are mapped back to
    A's for either orientation and selected the same way.
    """
    m, n = a.shape
    p, k = max_dim(m, n), min_dim(m, n)
    tall = jnp.asarray(m) >= jnp.asarray(n)  # dimensions are values at run time
    a_h = jnp.conj(a.T)
    a_tall = jnp.where(tall, _fit(a, p, k), _fit(a_h, p, k))
    out = _svd_tall(a_tall, full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return out
    s, u_t, vh_t = out  # a_tall = u_t diag(s) vh_t
    u_rows_cols = (m, m) if full_matrices else (m, k)
    vh_rows_cols = (n, n) if full_matrices else (k, n)
    # m >= n: A = u_t S vh_t.  m < n: A = A_tall^H = vh_t^H S u_t^H.
    u = jnp.where(tall, _fit(u_t, *u_rows_cols), _fit(jnp.conj(vh_t.T), *u_rows_cols))
    vh = jnp.where(tall, _fit(vh_t, *vh_rows_cols), _fit(jnp.conj(u_t.T), *vh_rows_cols))
    return s, u, vh


def _svd_impl(a, *, full_matrices, compute_uv):
    *batch, m, n = a.shape
    if m == 0 or n == 0:
        s = jnp.zeros((*batch, 0), jnp.finfo(a.dtype).dtype)
        if not compute_uv:
            return (s,)
        ucols = m if full_matrices else min_dim(m, n)
        vrows = n if full_matrices else min_dim(m, n)
        return (s, eye_like(batch, m, ucols, a.dtype),
                eye_like(batch, vrows, n, a.dtype))
    fn = functools.partial(_svd_2d, full_matrices=full_matrices,
                           compute_uv=compute_uv)
    return batched(fn, len(batch))(a)


def _svd_rule(ctx, a, *, full_matrices, compute_uv, subset_by_index,
              algorithm=None):
    del algorithm  # QDWH is the only portable choice.
    m, n = ctx.avals_in[0].shape[-2:]
    impl = functools.partial(_svd_impl, full_matrices=full_matrices,
                             compute_uv=compute_uv)
    if not (subset_by_index is None or tuple(subset_by_index) == (0, min_dim(m, n))):
        # A partial SVD (JAX has it on TPU only): singular values start..end-1 in
        # descending order, from the full decomposition (full_matrices is False then).
        start, end = subset_by_index
        full = impl

        def impl(a):
            out = full(a)
            s = out[0][..., start:end]
            if not compute_uv:
                return (s,)
            return s, out[1][..., start:end], out[2][..., start:end, :]

    return lower_symbolic(ctx, "svd", lambda: mlir.lower_fun(impl, multiple_results=True)(ctx, a))

