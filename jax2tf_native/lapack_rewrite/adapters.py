"""Per LAPACK routine: a JAX function giving exactly the results of jaxlib's kernel.

Each adapter takes the custom call's operands (in its operand order) and returns its results
in LAPACK's ABI as jaxlib calls it: getrf's 1-based int32 pivots, geqrf's Householder vectors
and taus, geev's eigenvalues split into real and imaginary parts for real input, gees' `sdim`,
and an int32 `info` per batch element. The modules JAX wrote only test `info` against 0 (and
replace the results by NaN otherwise), so `info` is 0 for a successful factorization and
positive when it failed (non-finite results or, for getrf, LAPACK's exactly-zero pivot rule).

The adapters are built from `jax.lax.linalg` primitives, which `linalg_portable`'s rules then
lower to StableHLO TF runs. They read only what LAPACK reads (the `uplo` triangle) and leave the
rest of an in-place result as LAPACK does (potrf keeps the other triangle of its input).

For example, the adapter of a `lapack_sgetrf_ffi` call site (`adapter_for(signature)`) maps the
matrix to `(lu, pivots, info)`, as the kernel does.
"""
from __future__ import annotations

from typing import Callable

import jax.numpy as jnp
import numpy as np
from jax import lax

from jax2tf_native import _jax_internals
from jax2tf_native.lapack_rewrite.targets import CallSignature, parse_tensor_type


class NotRewritableError(ValueError):
    """A LAPACK call with an option the adapters do not implement (e.g. gees with sorting)."""


def _mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _batch(x, core: int = 2):
    return x.shape[:x.ndim - core]


def _failed(batch_shape, *results) -> jnp.ndarray:
    """int32 `info`: 1 where a batch element's results are not all finite, else 0."""
    bad = jnp.zeros(batch_shape, bool)
    for r in results:
        bad = bad | ~jnp.all(jnp.isfinite(r), axis=tuple(range(len(batch_shape), r.ndim)))
    return bad.astype(np.int32)


def _first_index(flags) -> jnp.ndarray:
    """LAPACK's 1-based index of the first True along the last axis, 0 when none is."""
    return jnp.where(jnp.any(flags, axis=-1), jnp.argmax(flags, axis=-1) + 1, 0
                     ).astype(np.int32)


def _triangle_mask(n: int, lower: bool):
    rows = lax.broadcasted_iota(np.int32, (n, n), 0)
    cols = lax.broadcasted_iota(np.int32, (n, n), 1)
    return rows >= cols if lower else rows <= cols


def _potrf(sig: CallSignature):
    lower = sig.char("uplo", "L") == "L"

    def potrf(a):
        factor = lax.linalg.cholesky(a if lower else _mH(a), symmetrize_input=False)
        info = _first_index(~jnp.isfinite(jnp.diagonal(factor, axis1=-2, axis2=-1)))
        if not lower:
            factor = _mH(factor)
        return jnp.where(_triangle_mask(a.shape[-1], lower), factor, a), info

    return potrf


def _getrf(sig: CallSignature):
    del sig

    def getrf(a):
        lu, pivots, _ = lax.linalg.lu(a)
        # LAPACK: info = i when U(i, i) is exactly zero (the factorization is still complete).
        info = _first_index(jnp.diagonal(lu, axis1=-2, axis2=-1) == 0)
        return lu, (pivots + 1).astype(np.int32), info

    return getrf


def _geqrf(sig: CallSignature):
    del sig
    return lambda a: tuple(_jax_internals.geqrf_p.bind(a))


def _orgqr(sig: CallSignature):
    del sig
    return lambda a, taus: lax.linalg.householder_product(a, taus)


def _syevd(sig: CallSignature):
    lower = sig.char("uplo", "L") == "L"

    def syevd(a):
        v, w = lax.linalg.eigh(a, lower=lower, symmetrize_input=False, sort_eigenvalues=True)
        return v, w, _failed(_batch(a), w)

    return syevd


def _gesdd(sig: CallSignature):
    mode = sig.char("mode", "A")
    if mode not in "ASN":
        raise NotRewritableError(f"gesdd mode {mode!r} (expected 'A', 'S' or 'N')")

    # With 'N' JAX still allocates U and VT, full or reduced as the caller asked: their types
    # say which (LAPACK leaves them untouched; JAX never reads them).
    def square(result: int) -> bool:
        parsed = parse_tensor_type(sig.result_types[result])
        return parsed is not None and parsed[0][-1] == parsed[0][-2]

    u_full, vt_full = square(2), square(3)

    def gesdd(a):
        m, n = a.shape[-2:]
        k = min(m, n)
        batch = _batch(a)
        if mode == "N":
            s = lax.linalg.svd(a, full_matrices=False, compute_uv=False)
            u = jnp.zeros((*batch, m, m if u_full else k), a.dtype)
            vt = jnp.zeros((*batch, n if vt_full else k, n), a.dtype)
        else:
            u, s, vt = lax.linalg.svd(a, full_matrices=mode == "A", compute_uv=True)
        return a, s, u, vt, _failed(batch, s)

    return gesdd


def _trsm(sig: CallSignature):
    left = sig.char("side", "L") == "L"
    lower = sig.char("uplo", "L") == "L"
    trans = sig.char("trans_x", "N")
    unit = sig.char("diag", "N") == "U"

    def trsm(a, b, *alpha):
        if alpha:
            b = b * alpha[0].astype(b.dtype)
        return lax.linalg.triangular_solve(
            a, b, left_side=left, lower=lower, transpose_a=trans in "TC",
            conjugate_a=trans == "C", unit_diagonal=unit)

    return trsm


def _gehrd(sig: CallSignature):
    low, high = sig.option("low", 1), sig.option("high")

    def gehrd(a):
        if low != 1 or high != a.shape[-1]:
            raise NotRewritableError(f"gehrd with low={low}, high={high} (expected 1 and n)")
        h, taus = lax.linalg.hessenberg(a)
        return h, taus, _failed(_batch(a), h)

    return gehrd


def _sytrd(sig: CallSignature):
    lower = sig.char("uplo", "L") == "L"

    def sytrd(a):
        arr, d, e, taus = lax.linalg.tridiagonal(a, lower=lower)
        return arr, d, e, taus, _failed(_batch(a), d, e)

    return sytrd


def _geev(sig: CallSignature):
    left = sig.char("compute_left", "V") == "V"
    right = sig.char("compute_right", "V") == "V"

    def geev(a):
        out = list(lax.linalg.eig(a, compute_left_eigenvectors=left,
                                  compute_right_eigenvectors=right))
        w = out.pop(0)
        vectors_dtype = w.dtype
        vl = out.pop(0) if left else jnp.zeros(a.shape, vectors_dtype)
        vr = out.pop(0) if right else jnp.zeros(a.shape, vectors_dtype)
        info = _failed(_batch(a), w)
        if jnp.iscomplexobj(a):
            return w, vl, vr, info
        return jnp.real(w), jnp.imag(w), vl, vr, info

    return geev


def _quasi_triangular_eigenvalues(t):
    """(wr, wi) of a real Schur form: its 1x1 blocks and standardized 2x2 blocks."""
    d = jnp.diagonal(t, axis1=-2, axis2=-1)
    sub = jnp.diagonal(t, offset=-1, axis1=-2, axis2=-1)
    sup = jnp.diagonal(t, offset=1, axis1=-2, axis2=-1)
    pad = jnp.zeros((*d.shape[:-1], 1), d.dtype)
    starts = jnp.concatenate([sub != 0, pad != 0], axis=-1)  # a 2x2 block starts at row i
    ends = jnp.concatenate([pad != 0, sub != 0], axis=-1)  # ... or ends at row i
    d_next = jnp.concatenate([d[..., 1:], pad], axis=-1)
    b = jnp.concatenate([sup, pad], axis=-1)
    c = jnp.concatenate([sub, pad], axis=-1)
    mean = (d + d_next) / 2
    half_gap = (d - d_next) / 2
    imag = jnp.sqrt(jnp.maximum(-(half_gap * half_gap + b * c), 0))
    shifted = lambda x: jnp.concatenate([pad, x[..., :-1]], axis=-1)
    wr = jnp.where(starts, mean, jnp.where(ends, shifted(mean), d))
    wi = jnp.where(starts, imag, jnp.where(ends, -shifted(imag), 0))
    return wr, wi


def _gees(sig: CallSignature):
    vectors = sig.char("mode", "V") == "V"
    if sig.char("sort", "N") != "N":
        raise NotRewritableError("gees with eigenvalue sorting (JAX never emits it)")

    def gees(a):
        t, z = lax.linalg.schur(a, compute_schur_vectors=True)
        if not vectors:
            z = jnp.zeros_like(a)
        batch = _batch(a)
        sdim = jnp.zeros(batch, np.int32)
        info = _failed(batch, t)
        if jnp.iscomplexobj(a):
            return t, z, jnp.diagonal(t, axis1=-2, axis2=-1), sdim, info
        wr, wi = _quasi_triangular_eigenvalues(t)
        return t, z, wr, wi, sdim, info

    return gees


def _gtsv(sig: CallSignature):
    del sig

    def gtsv(dl, d, du, b):
        x = lax.linalg.tridiagonal_solve(dl, d, du, b)
        # jaxlib returns LAPACK's factors in dl, d, du; JAX's modules never read them.
        return dl, d, du, x, _failed(_batch(b), x)

    return gtsv


_ADAPTERS: dict[str, Callable[[CallSignature], Callable]] = {
    "potrf": _potrf, "getrf": _getrf, "geqrf": _geqrf, "orgqr": _orgqr, "syevd": _syevd,
    "gesdd": _gesdd, "trsm": _trsm, "gehrd": _gehrd, "sytrd": _sytrd, "geev": _geev,
    "gees": _gees, "gtsv": _gtsv,
}


def adapter_for(sig: CallSignature) -> Callable:
    """The JAX function computing `sig`'s results from its operands.

    Raises:
      NotRewritableError: the call uses an option no adapter implements.
    """
    return _ADAPTERS[sig.routine](sig)


def core_dim_names(sig: CallSignature) -> tuple[tuple[str, ...], ...]:
    """Per operand, names for its trailing (non-batch) dimensions, shared where LAPACK
    requires equal sizes; symbolic dimensions of the call get these names when exported."""
    square = (("n", "n"),)
    return {
        "potrf": square, "syevd": square, "gehrd": square, "sytrd": square, "geev": square,
        "gees": square, "getrf": (("m", "n"),), "geqrf": (("m", "n"),), "gesdd": (("m", "n"),),
        "orgqr": (("m", "n"), ("k",)),
        "trsm": (("n", "n"), ("n", "k") if sig.char("side", "L") == "L" else ("k", "n"), ()),
        "gtsv": (("n",), ("n",), ("n",), ("n", "k")),
    }[sig.routine]
