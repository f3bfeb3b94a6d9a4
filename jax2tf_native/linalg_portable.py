"""Linear algebra that TensorFlow's XLA can run: portable lowering rules.

On CPU, JAX lowers ``jax.lax.linalg`` primitives to LAPACK custom calls
(``lapack_sgetrf_ffi``, ``lapack_spotrf_ffi``, ...) whose handlers live in
jaxlib, so a module exported with them fails inside TensorFlow with
``No FFI handler registered for lapack_*``. This module supplies replacement
lowering rules that only emit what TF 2.21's XLA executes on CPU (measured):
the HLO ops ``stablehlo.cholesky`` and ``stablehlo.triangular_solve``, and the
custom calls ``Qr``, ``ProductOfElementaryHouseholderReflectors`` and ``Eigh``
(XLA expands these itself). Everything else is written as ordinary JAX code
on top of those.

Design note
-----------
*Hook.* The rules are handed to ``jax.export.export`` through its documented
``_override_lowering_rules`` keyword (a sequence of ``(primitive, rule)``)
rather than installed with ``jax.interpreters.mlir.register_lowering``:

- ``register_lowering`` mutates JAX's process-global registry. JAX caches
  lowerings (``_cached_lowering_to_hlo`` is keyed on the jaxpr and the
  lowering parameters, not on the registry), and ``jnp.linalg`` functions are
  themselves jitted, so a LAPACK lowering cached before the scope could leak
  into the export and a portable one cached inside it could leak into later
  normal JAX use. Restoring the registry also races with any other thread
  that lowers while the scope is open; a lock only helps threads that take it.
- The override rides in ``mlir.LoweringParameters``, which is part of every
  lowering cache key and of the module context that nested jits, ``lower_fun``
  and control flow lower with. So the override reaches the primitives inside
  ``jnp.linalg``'s own jits, cannot be served a cached LAPACK lowering, and
  never changes how anything outside the export lowers. Nothing global is
  mutated, so concurrent exports (portable or native) need no lock. The only
  shared state is the rule table, built once under a lock so its identity
  (part of the cache key) is stable and repeated exports hit JAX's cache.
- Its cost: it is an underscore keyword ("advanced, subject to change";
  pinned by tests/test_linalg_portable.py, which fails if it stops working),
  and an override applies to every platform of a multi-platform export. The
  rules below emit platform-neutral StableHLO, so that is what we want anyway
  (measured runnable in TF on CPU; GPU/TPU could not be run here).

*Rules.* ``triangular_solve`` emits the HLO op directly; ``cholesky`` is a
blocked algorithm in JAX (XLA's own expansion of ``stablehlo.cholesky`` is
~10x slower on CPU; it remains the fallback for a symbolic matrix size).
``householder_product`` and the ``geqrf`` step of ``qr`` emit the XLA custom
calls through the public ``jax.ffi`` API (``custom_call_api_version=1``), which
also handles symbolic (polymorphic) shapes. ``eigh`` emits XLA's ``Eigh``
(Jacobi) custom call, then refines its result to LAPACK accuracy (see the
eigh section below). ``lu`` is a blocked, partially pivoted LU in
JAX here (so ``solve``, ``inv``, ``det``, ``expm``, ``lu_factor`` work).
``svd`` is QDWH polar decomposition (public ``jax.lax.linalg.qdwh``) followed
by ``eigh`` of the Hermitian factor, the same algorithm JAX uses on TPU.
``ormqr`` multiplies by an explicit Q and ``tridiagonal_solve`` is the Thomas
algorithm. ``eig``, ``schur`` and ``hessenberg`` are the QR algorithm in JAX
(``jax2tf_native/linalg/``). Primitives with no portable form
(``tridiagonal``, column-pivoted QR) get a rule that raises
:class:`NonPortableLinalgError` while exporting, never at TF run time.
One JAX internal is used: ``geqrf_p``/``geqp3_p``, which public functions
bind but JAX does not export (``_jax_internals``, pinned by a test).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import mlir as jex_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import chlo
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import mlir

from jax2tf_native import _jax_internals
from jax2tf_native.linalg import nonsymmetric_rules as _nonsymmetric

__all__ = [
    "NonPortableLinalgError",
    "PORTABLE_CUSTOM_CALL_TARGETS",
    "check_module_portable",
    "custom_call_targets",
    "export_scope",
    "portable_lowering_rules",
]

#: Custom-call targets that TF's XLA expands itself on CPU (measured, TF 2.21).
PORTABLE_CUSTOM_CALL_TARGETS = frozenset(
    {"Qr", "ProductOfElementaryHouseholderReflectors", "Eigh"})

# Linear-algebra targets whose handlers live only in jaxlib (LAPACK on CPU,
# cuSOLVER/hipSOLVER/cuSPARSE and small CUDA/HIP kernels on GPU), or that TF's
# CPU XLA does not expand (LuDecomposition). Other custom calls are not this
# module's business (tf_ops has the full allowlist).
_NON_PORTABLE_TARGET = re.compile(
    r"^(lapack_|LuDecomposition$|cusolver_|hipsolver_|cusparse_gtsv|hipsparse_gtsv"
    r"|(cu|hip)_lu_pivots_to_permutation|(cu|hip)_cholesky_update)")

_KNOWN_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")

_HIGHEST = lax.Precision.HIGHEST


class NonPortableLinalgError(ValueError):
    """A linear-algebra operation cannot be lowered to TF-runnable StableHLO.

    Attributes:
        primitive: name of the JAX primitive (e.g. ``"eig"``), or ``None`` when the
            problem was found by :func:`check_module_portable`.
        platforms: the export platforms.
        reason: why no portable lowering exists.
    """

    def __init__(self, primitive: str | None, platforms: Sequence[str],
                 reason: str, fix: str):
        self.primitive = primitive
        self.platforms = tuple(platforms)
        self.reason = reason
        where = ", ".join(self.platforms) or "?"
        if primitive:
            head = (f"jax.lax.linalg primitive '{primitive}' cannot be exported for "
                    f"TensorFlow with linalg='portable' on platform(s) {where}")
        else:
            head = (f"the exported module (platform(s) {where}) cannot run in "
                    "TensorFlow")
        super().__init__(f"{head}: {reason}. {fix}")


_NATIVE_FIX = ("Fix: avoid this operation in functions exported for "
               "TensorFlow, or export with linalg='native' if the module will "
               "only be run back in JAX (TF cannot run jaxlib's LAPACK calls).")


def _raise_non_portable(ctx, primitive: str, reason: str, fix: str = _NATIVE_FIX):
    platforms = tuple(getattr(ctx.module_context, "platforms", ()) or ())
    raise NonPortableLinalgError(primitive, platforms, reason, fix)


def _require_static(ctx, primitive: str, *dims) -> None:
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        _raise_non_portable(
            ctx, primitive,
            f"the matrix dimensions {tuple(str(d) for d in dims)} are symbolic; "
            "the portable algorithm unrolls over them",
            "Fix: make only the leading batch dimensions polymorphic "
            "(e.g. 'b, 4, 4'), keep the last two dimensions concrete.")


# ---------------------------------------------------------------------------
# cholesky, triangular_solve: HLO ops XLA expands itself.

def _hlo_cholesky_rule(ctx, operand):
    del ctx
    # Measured: for a matrix that is not positive definite XLA's expansion
    # returns NaN in the whole lower triangle, as JAX's LAPACK path does.
    return [hlo.cholesky(operand, lower=ir.BoolAttr.get(True))]


# Measured in TF at n = 512 (one thread): XLA's expansion 58 ms, blocks of
# 128 -> 26 ms, 64 -> 6 ms (JAX's LAPACK: 5 ms). First call (compile) 1.7 s
# -> 4.7 s, paid once per shape.
_CHOLESKY_BLOCK = 64


def _cholesky_unblocked(a):
    """Right-looking Cholesky of a small block by masked rank-1 updates."""
    n = a.shape[-1]
    rows = lax.iota(np.int32, n)

    def step(j, a):
        col = lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
        d = jnp.sqrt(jnp.real(col[j])).astype(a.dtype)
        col = jnp.where(rows > j, col / d, jnp.where(rows == j, d, 0))
        a = lax.dynamic_update_index_in_dim(a, col[:, None], j, axis=1)
        below = rows > j
        update = col[:, None] * jnp.conj(col)[None, :]
        return a - jnp.where(below[:, None] & below[None, :], update, 0)

    return jnp.tril(lax.fori_loop(0, n, step, a))


def _cholesky_2d(a):
    """Blocked right-looking Cholesky: small blocks, then a solve and a matmul.

    Reads the lower triangle only, like LAPACK's potrf(uplo='L').
    """
    n = a.shape[-1]
    for k in range(0, n, _CHOLESKY_BLOCK):
        b = min(_CHOLESKY_BLOCK, n - k)
        l11 = _cholesky_unblocked(a[k:k + b, k:k + b])
        a = a.at[k:k + b, k:k + b].set(l11)
        if k + b < n:
            l21 = lax.linalg.triangular_solve(
                l11, a[k + b:, k:k + b], left_side=False, lower=True,
                transpose_a=True, conjugate_a=True)
            a = a.at[k + b:, k:k + b].set(l21)
            a = a.at[k + b:, k + b:].add(
                -jnp.matmul(l21, jnp.conj(l21.T), precision=_HIGHEST))
    lower = jnp.tril(a)
    # LAPACK's contract, kept by JAX: a matrix that is not positive definite
    # gives NaN in the whole lower triangle, not just from the failing column.
    failed = jnp.any(jnp.isnan(lower))
    return jnp.where(failed, jnp.tril(jnp.full_like(lower, jnp.nan)), lower)


def _cholesky_impl(a):
    fn = _cholesky_2d
    for _ in range(a.ndim - 2):
        fn = jax.vmap(fn)
    return fn(a)


def _cholesky_rule(ctx, a):
    # XLA's own Cholesky expansion runs ~10x slower than this on CPU (its
    # unblocked part dominates; benchmarks/results/linalg.md).
    n = ctx.avals_in[0].shape[-1]
    if not isinstance(n, (int, np.integer)):
        return _hlo_cholesky_rule(ctx, a)  # the blocked loop needs a static n
    return mlir.lower_fun(_cholesky_impl, multiple_results=False)(ctx, a)


def _triangular_solve_rule(ctx, a, b, *, left_side, lower, transpose_a,
                           conjugate_a, unit_diagonal):
    out_aval, = ctx.avals_out
    if conjugate_a and not transpose_a:
        # HLO has no "conjugate without transpose" mode.
        a = chlo.conj(a)
        conjugate_a = False
    if not transpose_a:
        transpose = "NO_TRANSPOSE"
    else:
        transpose = "ADJOINT" if conjugate_a else "TRANSPOSE"
    out = hlo.triangular_solve(a, b, ir.BoolAttr.get(left_side),
                               ir.BoolAttr.get(lower),
                               ir.BoolAttr.get(unit_diagonal),
                               hlo.TransposeAttr.get(transpose))
    return [jex_mlir.lower_with_sharding_in_types(ctx, out, out_aval)]


# ---------------------------------------------------------------------------
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


def _eye_like(batch, rows, cols, dtype):
    return jnp.broadcast_to(jnp.eye(rows, cols, dtype=dtype),
                            (*batch, rows, cols))


def _qr_impl(a, *, full_matrices):
    *batch, m, n = a.shape
    k = m if full_matrices else min(m, n)
    if m == 0 or n == 0:
        return _eye_like(batch, m, k, a.dtype), jnp.zeros((*batch, k, n), a.dtype)
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
        _raise_non_portable(
            ctx, "qr", "column-pivoted QR (geqp3) exists only as a LAPACK/MAGMA "
            "kernel in jaxlib")
    m, n = ctx.avals_in[0].shape[-2:]
    _require_static(ctx, "qr", m, n)
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
    return (jnp.matmul(q, c, precision=_HIGHEST) if left
            else jnp.matmul(c, q, precision=_HIGHEST))


def _ormqr_rule(ctx, a, taus, c, *, left, transpose):
    _require_static(ctx, "ormqr", *ctx.avals_in[0].shape[-2:])
    return mlir.lower_fun(
        functools.partial(_ormqr_impl, left=left, transpose=transpose),
        multiple_results=False)(ctx, a, taus, c)


# ---------------------------------------------------------------------------
# LU with partial pivoting, written in JAX (TF's CPU XLA has no
# LuDecomposition expander).

# Measured in TF at n = 512: 128 -> 19 ms, 64 -> 9 ms, 32 -> 7 ms (but more
# unrolled blocks, so a longer XLA compilation).
_LU_BLOCK = 64


def _pivot_magnitude(x):
    # LAPACK's i?amax measure: |re| + |im|.
    if jnp.iscomplexobj(x):
        return jnp.abs(x.real) + jnp.abs(x.imag)
    return jnp.abs(x)


def _lu_panel(a):
    """Unblocked right-looking LU of an (m, b) panel, as a rolled loop."""
    m, n = a.shape
    rows = lax.iota(np.int32, m)
    cols = lax.iota(np.int32, n)

    def step(j, state):
        pivots, perm, a = state
        col = lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
        magnitude = jnp.where(rows >= j, _pivot_magnitude(col), -jnp.inf)
        i = jnp.argmax(magnitude).astype(np.int32)
        pivots = pivots.at[j].set(i)
        swap = jnp.stack([j, i])
        a = a.at[swap].set(a[swap[::-1]])
        perm = perm.at[swap].set(perm[swap[::-1]])
        diag = a[j, j]
        col = lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
        col = jnp.where((rows > j) & (diag != 0), col / diag, col)
        a = lax.dynamic_update_index_in_dim(a, col[:, None], j, axis=1)
        row = lax.dynamic_index_in_dim(a, j, axis=0, keepdims=False)
        mask = (rows[:, None] > j) & (cols[None, :] > j)
        a = a - jnp.where(mask, col[:, None] * row[None, :], jnp.zeros((), a.dtype))
        return pivots, perm, a

    k = min(m, n)
    init = (jnp.zeros((k,), np.int32), lax.iota(np.int32, m), a)
    if k == 0:
        return init
    return lax.fori_loop(0, k, step, init)


def _lu_2d(a):
    """Blocked LU: panel factorization, then a triangular solve and a matmul."""
    m, n = a.shape
    k = min(m, n)
    pivots = jnp.zeros((k,), np.int32)
    perm = lax.iota(np.int32, m)
    for start in range(0, k, _LU_BLOCK):
        b = min(k - start, _LU_BLOCK)
        p_piv, p_perm, panel = _lu_panel(a[start:, start:start + b])
        pivots = pivots.at[start:start + b].set(p_piv + start)
        perm = perm.at[start:].set(perm[start:][p_perm])
        a = a.at[start:, :].set(a[start:, :][p_perm])
        a = a.at[start:, start:start + b].set(panel)
        if start + b < n:
            u12 = lax.linalg.triangular_solve(
                a[start:start + b, start:start + b], a[start:start + b, start + b:],
                left_side=True, lower=True, unit_diagonal=True)
            a = a.at[start:start + b, start + b:].set(u12)
            a = a.at[start + b:, start + b:].add(
                -jnp.matmul(a[start + b:, start:start + b], u12, precision=_HIGHEST))
    return a, pivots, perm


def _lu_impl(a):
    fn = _lu_2d
    for _ in range(a.ndim - 2):
        fn = jax.vmap(fn)
    return fn(a)


def _lu_rule(ctx, a):
    _require_static(ctx, "lu", *ctx.avals_in[0].shape[-2:])
    return mlir.lower_fun(_lu_impl, multiple_results=True)(ctx, a)


# ---------------------------------------------------------------------------
# eigh: XLA's "Eigh" custom call (two-sided Jacobi), config string
# "lower,sort_eigenvalues,max_sweeps,tolerance", then refinement.
#
# Measured in TF 2.21, the expansion alone is not LAPACK-accurate: a matrix
# scaled by 1e-20 comes back unrotated (float32), it stops at ~1e-6 (float32)
# and ~1e-8 (float64) relative accuracy whatever the tolerance, and it never
# rotates a coupling that is tiny next to the diagonal (its convergence test
# appears to take the off-diagonal norm as a difference of squares). Hence:
# 1. scale the input to max |a_ij| = 1;
# 2. Ogita-Aishima refinement (matmuls only, quadratically convergent) for
#    well-separated eigenvalues, then Newton-Schulz re-orthonormalization;
# 3. float64 only: a Jacobi polish written in JAX for eigenvalue clusters.
# Result (docs/linalg.md): reconstruction and orthogonality errors at or
# below LAPACK's in float32 and float64.

_EIGH_MAX_SWEEPS = 100
_EIGH_TOLERANCE = 1e-6  # The refinement takes over from here.
_POLISH_MAX_SWEEPS = 12


def _mT(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _hermitian_from_triangle(a, lower):
    # eigh reads only one triangle; the refinement needs the whole matrix.
    strict = jnp.tril(a, -1) if lower else jnp.triu(a, 1)
    diag = jnp.real(jnp.diagonal(a, axis1=-2, axis2=-1)).astype(a.dtype)
    return strict + _mT(strict) + diag[..., None] * jnp.eye(a.shape[-1],
                                                            dtype=a.dtype)


def _eigh_refine(a, v):
    """One Ogita-Aishima step: improves eigenvectors v of Hermitian a.

    T. Ogita, K. Aishima, "Iterative refinement for symmetric eigenvalue
    decomposition", Japan J. Indust. Appl. Math. 35 (2018), Algorithm 1.
    Pairs closer than the error bound delta are only re-orthogonalized; those
    clusters are left to _jacobi_polish.
    """
    mm = functools.partial(jnp.matmul, precision=_HIGHEST)
    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)
    r = eye - mm(_mT(v), v)
    s = mm(_mT(v), mm(a, v))
    lam = jnp.real(jnp.diagonal(s, axis1=-2, axis2=-1)) / (
        1 - jnp.real(jnp.diagonal(r, axis1=-2, axis2=-1)))
    fro = lambda x: jnp.sqrt(jnp.sum(jnp.abs(x) ** 2, axis=(-2, -1)))
    off = s - lam[..., :, None] * eye
    delta = 2 * (fro(off) + fro(a) * fro(r))
    # s_ij carries ~eps*|A| of rounding, which the update divides by the gap:
    # pairs closer than sqrt(eps)*|A| would lose orthogonality, so they are
    # left to Jacobi (the expansion, and _jacobi_polish in float64).
    delta = jnp.maximum(delta, float(np.sqrt(jnp.finfo(a.dtype).eps)) * fro(a))
    gap = lam[..., None, :] - lam[..., :, None]  # lam_j - lam_i
    separated = jnp.abs(gap) > delta[..., None, None]
    safe_gap = jnp.where(separated, gap, 1).astype(a.dtype)
    e = jnp.where(separated, (s + lam[..., None, :].astype(a.dtype) * r) / safe_gap,
                  r / 2)
    return v + mm(v, e)


def _jacobi_eigenvectors(a, *, sort, max_sweeps, tolerance):
    v, _ = jax.ffi.ffi_call(
        "Eigh",
        (jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], jnp.finfo(a.dtype).dtype)),
        custom_call_api_version=1,
        legacy_backend_config=f"1,{int(sort)},{max_sweeps},{float(tolerance)!r}",
    )(a)
    return v


def _orthonormalize(v):
    # Working-precision rounding in the refinement leaves V slightly
    # non-orthonormal (float32: ~1e-5); one Newton-Schulz step fixes that.
    eye = jnp.eye(v.shape[-1], dtype=v.dtype)
    return v + jnp.matmul(
        v, (eye - jnp.matmul(_mT(v), v, precision=_HIGHEST)) / 2,
        precision=_HIGHEST)


def _refined_eigenvectors(a, v):
    for _ in range(_eigh_refinement_steps(jnp.finfo(a.dtype).dtype)):
        v = _eigh_refine(a, v)
    return _orthonormalize(v)


def _round_robin_pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Circle-method tournament: m - 1 rounds of m / 2 disjoint (p, q) pairs."""
    others = list(range(1, m))
    ps, qs = [], []
    for r in range(m - 1):
        order = [0] + others[r:] + others[:r]
        ps.append([order[i] for i in range(m // 2)])
        qs.append([order[m - 1 - i] for i in range(m // 2)])
    return np.array(ps, np.int32), np.array(qs, np.int32)


def _jacobi_polish_2d(b):
    """Cyclic parallel Jacobi on a real symmetric, nearly diagonal b.

    Returns the orthogonal W with W^T b W diagonal. Used in float64 after the
    refinement, for eigenvalue clusters: XLA's expansion stops at ~1e-8
    relative coupling and the refinement cannot separate a cluster. Sweeps
    stop at round-off level; when the refinement already got there, none runs.
    """
    n = b.shape[-1]
    m = n + n % 2  # an even size; the padding row/column is never rotated
    if m != n:
        b = jnp.pad(b, ((0, 1), (0, 1)))
    p_table, q_table = (jnp.asarray(t) for t in _round_robin_pairs(m))
    eps = float(jnp.finfo(b.dtype).eps)
    fro = lambda x: jnp.sqrt(jnp.sum(x * x))
    offdiag = lambda x: x - jnp.diag(jnp.diagonal(x))

    def one_round(r, state):
        b, w = state
        p, q = p_table[r], q_table[r]
        app, aqq, apq = b[p, p], b[q, q], b[p, q]
        rotate = apq != 0
        tau = (aqq - app) / (2 * jnp.where(rotate, apq, 1))
        # Golub & Van Loan, Algorithm 8.5.1: the smaller root, t = tan(theta).
        t = jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.hypot(1.0, tau))
        t = jnp.where(rotate, t, 0).astype(b.dtype)
        c = lax.rsqrt(1 + t * t)
        s = t * c
        bp, bq = b[p], b[q]
        b = b.at[p].set(c[:, None] * bp - s[:, None] * bq)
        b = b.at[q].set(s[:, None] * bp + c[:, None] * bq)
        bp, bq = b[:, p], b[:, q]
        b = b.at[:, p].set(bp * c - bq * s).at[:, q].set(bp * s + bq * c)
        wp, wq = w[:, p], w[:, q]
        w = w.at[:, p].set(wp * c - wq * s).at[:, q].set(wp * s + wq * c)
        return b, w

    def not_converged(state):
        i, b, _ = state
        return (i < _POLISH_MAX_SWEEPS) & (fro(offdiag(b)) > m * eps * fro(b))

    def sweep(state):
        i, b, w = state
        b, w = lax.fori_loop(0, m - 1, one_round, (b, w))
        return i + 1, b, w

    _, _, w = lax.while_loop(not_converged, sweep,
                             (0, b, jnp.eye(m, dtype=b.dtype)))
    return w[:n, :n]


def _jacobi_polish(a, v):
    mm = functools.partial(jnp.matmul, precision=_HIGHEST)
    b = mm(_mT(v), mm(a, v))
    b = (b + _mT(b)) / 2
    fn = _jacobi_polish_2d
    for _ in range(a.ndim - 2):
        fn = jax.vmap(fn)
    # Two Newton-Schulz steps: graded spectra can leave V ~1e-5 off orthogonal.
    return _orthonormalize(_orthonormalize(mm(v, fn(b))))


def _eigh_impl(a, *, lower, sort_eigenvalues):
    real_dtype = jnp.finfo(a.dtype).dtype
    a = _hermitian_from_triangle(a, lower)
    scale = jnp.max(jnp.abs(a), axis=(-2, -1), keepdims=True)
    scale = jnp.where((scale > 0) & jnp.isfinite(scale), scale, 1)
    scaled = a / scale.astype(a.dtype)
    v = _jacobi_eigenvectors(scaled, sort=sort_eigenvalues,
                             max_sweeps=_EIGH_MAX_SWEEPS,
                             tolerance=_EIGH_TOLERANCE)
    v = _refined_eigenvectors(scaled, v)
    # complex128, and a symbolic matrix size (the tournament table is static),
    # keep the refinement only.
    if np.dtype(a.dtype) == np.float64 and isinstance(a.shape[-1], int):
        v = _jacobi_polish(scaled, v)
    # Rayleigh quotients of the refined vectors.
    av = jnp.matmul(scaled, v, precision=_HIGHEST)
    w = (jnp.real(jnp.sum(jnp.conj(v) * av, axis=-2))
         / jnp.real(jnp.sum(jnp.conj(v) * v, axis=-2)))
    if sort_eigenvalues:
        # Refinement and polish can swap nearly equal eigenvalues.
        order = jnp.argsort(w, axis=-1)
        w = jnp.take_along_axis(w, order, axis=-1)
        v = jnp.take_along_axis(v, order[..., None, :], axis=-1)
    return v, w * scale[..., 0].astype(real_dtype)


def _eigh_refinement_steps(real_dtype) -> int:
    # From ~1e-6 to eps: one step in float32, two in float64.
    return 1 if np.dtype(real_dtype).itemsize <= 4 else 2


def _eigh_rule(ctx, a, *, lower, sort_eigenvalues, subset_by_index,
               algorithm=None):
    del algorithm  # Jacobi is the only portable choice; results are the same.
    n = ctx.avals_in[0].shape[-1]
    if not (subset_by_index is None or tuple(subset_by_index) == (0, n)):
        _raise_non_portable(
            ctx, "eigh", f"subset_by_index={subset_by_index} (partial spectrum) "
            "has no CPU implementation outside LAPACK",
            "Fix: compute the full spectrum and slice it.")
    if isinstance(n, (int, np.integer)) and n == 0:
        return mlir.lower_fun(
            lambda x: (x, jnp.zeros(x.shape[:-1], jnp.finfo(x.dtype).dtype)),
            multiple_results=True)(ctx, a)
    return mlir.lower_fun(
        functools.partial(_eigh_impl, lower=lower,
                          sort_eigenvalues=sort_eigenvalues),
        multiple_results=True)(ctx, a)


# ---------------------------------------------------------------------------
# svd: QDWH polar decomposition A = U_p H, then H = V diag(s) V^H by eigh,
# U = U_p V (Nakatsukasa & Higham 2013; JAX's TPU algorithm, public pieces).

_QDWH_MAX_ITERATIONS = 10


def _svd_2d(a, *, full_matrices, compute_uv):
    m, n = a.shape
    flip = m < n
    if flip:
        a = jnp.conj(a.T)
        m, n = n, m
    q = u_null = None
    if full_matrices and m > n:
        q_full, r_full = lax.linalg.qr(a, full_matrices=True)
        q, u_null, a = q_full[:, :n], q_full[:, n:], r_full[:n, :]
    elif m > 1.15 * n:
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
    u = jnp.matmul(u_p, v, precision=_HIGHEST)

    # For (numerically) rank-deficient A the polar factor is not unitary on the
    # null space; re-orthonormalize (Nakatsukasa & Higham 2013, section 5.5).
    def reorthonormalize(u):
        u, r = lax.linalg.qr(u, full_matrices=False)
        return u * jnp.where(jnp.real(jnp.diagonal(r)) >= 0, 1, -1).astype(u.dtype)

    eps = float(jnp.finfo(a.dtype).eps)
    u = lax.cond(s[-1] <= n * eps * s[0], reorthonormalize, lambda u: u, u)
    if q is not None:
        u = jnp.matmul(q, u, precision=_HIGHEST)
    if u_null is not None:
        u = jnp.concatenate([u, u_null], axis=1)
    nan = jnp.array(jnp.nan, u.dtype)
    u = jnp.where(finite, u, nan)
    vh = jnp.where(finite, jnp.conj(v.T), nan)
    if flip:
        return s, jnp.conj(vh.T), jnp.conj(u.T)
    return s, u, vh


def _svd_impl(a, *, full_matrices, compute_uv):
    *batch, m, n = a.shape
    if m == 0 or n == 0:
        s = jnp.zeros((*batch, 0), jnp.finfo(a.dtype).dtype)
        if not compute_uv:
            return (s,)
        ucols = m if full_matrices else min(m, n)
        vrows = n if full_matrices else min(m, n)
        return (s, _eye_like(batch, m, ucols, a.dtype),
                _eye_like(batch, vrows, n, a.dtype))
    fn = functools.partial(_svd_2d, full_matrices=full_matrices,
                           compute_uv=compute_uv)
    for _ in batch:
        fn = jax.vmap(fn)
    return fn(a)


def _svd_rule(ctx, a, *, full_matrices, compute_uv, subset_by_index,
              algorithm=None):
    del algorithm  # QDWH is the only portable choice.
    m, n = ctx.avals_in[0].shape[-2:]
    _require_static(ctx, "svd", m, n)
    if not (subset_by_index is None or tuple(subset_by_index) == (0, min(m, n))):
        _raise_non_portable(
            ctx, "svd", f"subset_by_index={subset_by_index} (partial SVD) is not "
            "implemented portably", "Fix: compute the full SVD and slice it.")
    return mlir.lower_fun(
        functools.partial(_svd_impl, full_matrices=full_matrices,
                          compute_uv=compute_uv),
        multiple_results=True)(ctx, a)


# ---------------------------------------------------------------------------
# tridiagonal_solve: Thomas algorithm (no pivoting, like JAX's own fallback).

def _thomas_2d(dl, d, du, b):
    def forward(carry, row):
        cp, dp = carry
        a_i, b_i, c_i, rhs = row
        denom = b_i - a_i * cp
        nxt = (c_i / denom, (rhs - a_i * dp) / denom)
        return nxt, nxt

    first = (du[0] / d[0], b[0] / d[0])
    _, (cps, dps) = lax.scan(forward, first, (dl[1:], d[1:], du[1:], b[1:]))
    cps = jnp.concatenate([first[0][None], cps])
    dps = jnp.concatenate([first[1][None], dps])

    def backward(x_next, row):
        cp, dp = row
        x = dp - cp * x_next
        return x, x

    _, xs = lax.scan(backward, jnp.zeros_like(dps[-1]), (cps, dps), reverse=True)
    return xs


def _tridiagonal_solve_impl(dl, d, du, b):
    fn = _thomas_2d
    for _ in range(dl.ndim - 1):
        fn = jax.vmap(fn)
    return fn(dl, d, du, b)


def _tridiagonal_solve_rule(ctx, dl, d, du, b, *, perturb_singular=False):
    if perturb_singular:
        _raise_non_portable(
            ctx, "tridiagonal_solve", "perturb_singular=True relies on LAPACK's "
            "gtsv pivoting", "Fix: pass perturb_singular=False.")
    _require_static(ctx, "tridiagonal_solve", ctx.avals_in[0].shape[-1])
    return mlir.lower_fun(_tridiagonal_solve_impl, multiple_results=False)(
        ctx, dl, d, du, b)


# ---------------------------------------------------------------------------
# Primitives with no portable lowering: fail while exporting.

_NO_PORTABLE_FORM = {
    "tridiagonal": "tridiagonal reduction exists only as LAPACK sytrd in "
                   "jaxlib",
    "geqp3": "column-pivoted QR exists only as LAPACK geqp3 (or MAGMA) in "
             "jaxlib",
}


def _is_empty(aval) -> bool:
    return any(isinstance(d, int) and d == 0 for d in aval.shape)


def _non_portable_rule(name: str):
    def rule(ctx, *args, **params):
        del params
        if all(_is_empty(aval) for aval in ctx.avals_out):
            # Nothing to compute (e.g. eigvals of a 0x0 matrix): the results are empty arrays.
            return mlir.lower_fun(lambda *_: [jnp.zeros(a.shape, a.dtype) for a in ctx.avals_out],
                                  multiple_results=True)(ctx, *args)
        _raise_non_portable(ctx, name, _NO_PORTABLE_FORM[name])
    rule.__name__ = f"_{name}_not_portable_rule"
    return rule


def _static_square_rule(name: str, rule):
    def checked(ctx, a, **params):
        _require_static(ctx, name, *ctx.avals_in[0].shape[-2:])
        return rule(ctx, a, **params)
    checked.__name__ = f"_{name}_portable_rule"
    return checked


# ---------------------------------------------------------------------------
# Rule table and the export scope.

_rules_lock = threading.Lock()
_rules: tuple[tuple[Any, Any], ...] | None = None


def portable_lowering_rules() -> tuple[tuple[Any, Any], ...]:
    """Returns the ``(primitive, lowering rule)`` pairs of the portable lowering.

    The tuple is built once and then always the same object, so JAX's lowering
    cache (which keys on it) is reused across exports.

    Example:
        >>> rules = portable_lowering_rules()
        >>> exported = jax.export.export(
        ...     jax.jit(jnp.linalg.inv), platforms=("cpu",),
        ...     _override_lowering_rules=rules)(np.eye(3, dtype=np.float32))
    """
    global _rules
    with _rules_lock:
        if _rules is None:
            lin = lax.linalg
            table = [
                (lin.cholesky_p, _cholesky_rule),
                (lin.triangular_solve_p, _triangular_solve_rule),
                (lin.lu_p, _lu_rule),
                (lin.qr_p, _qr_rule),
                (lin.householder_product_p, _householder_product_rule),
                (lin.ormqr_p, _ormqr_rule),
                (lin.eigh_p, _eigh_rule),
                (lin.svd_p, _svd_rule),
                (lin.tridiagonal_solve_p, _tridiagonal_solve_rule),
            ]
            # eig, schur, hessenberg: jax2tf_native/linalg/ (QR algorithm in JAX).
            table += [(getattr(lin, f"{name}_p"),
                       _static_square_rule(name, getattr(_nonsymmetric, f"{name}_rule")))
                      for name in ("eig", "schur", "hessenberg")]
            table += [(getattr(lin, f"{name}_p"), _non_portable_rule(name))
                      for name in ("tridiagonal",)]
            # Not exported publicly by JAX: see _jax_internals.
            table += [(_jax_internals.geqrf_p, _geqrf_rule),
                      (_jax_internals.geqp3_p, _non_portable_rule("geqp3"))]
            _rules = tuple(table)
        return _rules


@contextlib.contextmanager
def export_scope(platforms: Sequence[str] = ("cpu",)
                 ) -> Iterator[dict[str, Any]]:
    """Scope in which ``jax.export.export`` lowers linear algebra portably.

    Yields the extra keyword arguments to pass to ``jax.export.export``. No JAX
    state is changed, so the scope is thread-safe and nothing leaks out of it:
    exports made without the yielded arguments, and ordinary ``jax.jit`` use,
    keep JAX's native (LAPACK) lowering.

    Args:
        platforms: the platforms the export targets (lower-case JAX names). Used
            to validate the request; the rules apply to every exported platform.

    Yields:
        ``{"_override_lowering_rules": ...}`` for ``jax.export.export``.

    Raises:
        ValueError: for an unknown platform name.
        NonPortableLinalgError: (from the export) for primitives with no portable
            lowering, such as ``eig`` or ``schur``.

    Example:
        >>> with export_scope(platforms=("cpu",)) as extra:
        ...   exported = jax.export.export(jax.jit(jnp.linalg.solve),
        ...                                platforms=("cpu",), **extra)(a, b)
        >>> check_module_portable(exported)
    """
    if isinstance(platforms, str):
        platforms = (platforms,)
    bad = [p for p in platforms if str(p).lower() not in _KNOWN_PLATFORMS]
    if bad or not platforms:
        raise ValueError(
            f"export_scope: unknown platform(s) {bad or list(platforms)}; expected "
            f"a non-empty subset of {_KNOWN_PLATFORMS}. Fix: pass the same "
            "lower-case platform names given to jax.export.export.")
    yield {_jax_internals.OVERRIDE_LOWERING_RULES_KWARG: portable_lowering_rules()}


# ---------------------------------------------------------------------------
# Module check.

_CUSTOM_CALL_TARGET = re.compile(
    r'stablehlo\.custom_call\s*@([\w.$\-]+)|call_target_name\s*=\s*"([^"]+)"')


def custom_call_targets(exported: jax.export.Exported) -> list[str]:
    """Returns the sorted, distinct custom-call targets of an exported module.

    Example:
        >>> custom_call_targets(exported)
        ['Qr', 'ProductOfElementaryHouseholderReflectors']
    """
    text = exported.mlir_module()
    return sorted({a or b for a, b in _CUSTOM_CALL_TARGET.findall(text)})


def check_module_portable(exported: jax.export.Exported) -> None:
    """Raises if the module still calls LAPACK/solver kernels TF cannot run.

    Args:
        exported: the result of ``jax.export.export``.

    Raises:
        NonPortableLinalgError: naming the offending custom-call targets.

    Example:
        >>> check_module_portable(exported)  # silent when portable
    """
    bad = [t for t in custom_call_targets(exported)
           if _NON_PORTABLE_TARGET.match(t)]
    if bad:
        raise NonPortableLinalgError(
            None, exported.platforms,
            f"it calls jaxlib-only custom call target(s) {bad}, which TF's XLA "
            "has no handler for (expected only portable targets such as "
            f"{sorted(PORTABLE_CUSTOM_CALL_TARGETS)})",
            "Fix: export inside linalg_portable.export_scope() and pass the "
            "yielded keyword arguments to jax.export.export (convert(..., "
            "linalg='portable')).")
