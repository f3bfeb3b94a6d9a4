"""The rule table of a CPU export for plain TF ops (`enable_xla=False`): TF's own kernels.

Plain TF graphs run cholesky, triangular_solve, eigh and svd on TF's kernels. The export keeps
JAX's CPU lowering of these primitives, whose jaxlib LAPACK custom calls (potrf, trsm,
syevd/heevd, gesdd) each name one decomposition with documented conventions, and
`tf_ops.plain.lapack_kernels` maps each onto `Cholesky`, `MatrixTriangularSolve`,
`SelfAdjointEigV2` or `Svd` (conventions and exactness there).

Why this route (issue 36, measured in benchmarks/results/linalg_plain.md): the portable
algorithms, written for XLA, become long chains of small TF ops and `While` loops in a plain
graph (a GP posterior with cholesky, cho_solve and eigh ran 21-41x slower than its
`XlaCallModule` graph, ~5,400 graph nodes); on TF's kernels it runs faster than the
`XlaCallModule` graph, in ~280 nodes. Raising the portable algorithms back to kernels after
export would mean recognizing each algorithm's ops as it happens to be written, where a LAPACK
call names its decomposition and the kernels compute the same one.

Parameters JAX's CPU lowering refuses are taken by the same kernels: a partial spectrum
(`subset_by_index`) is the full decomposition, sliced; another eigh or svd algorithm (QDWH,
Jacobi, svd's QR) is the default one, equal up to rounding and the sign of each vector, which
no algorithm fixes. The other primitives keep their portable rules: TF's `Lu` raises on a
singular matrix, where LAPACK completes the factorization, and TF's `Qr` returns Q and R, not
the Householder vectors and taus that geqrf and householder_product pass between them.
"""
from __future__ import annotations

import threading
from typing import Any

from jax import lax
from jax.interpreters import mlir

from jax2tf_native import _jax_internals
from jax2tf_native.linalg.common import min_dim

_lock = threading.Lock()
_tables: dict[int, tuple[tuple[Any, Any], ...]] = {}


def _whole(subset_by_index, size) -> bool:
    return subset_by_index is None or tuple(subset_by_index) == (0, size)


def _eigh_rule(ctx, a, *, lower, sort_eigenvalues, subset_by_index, algorithm=None):
    n = ctx.avals_in[0].shape[-1]
    if _whole(subset_by_index, n) and algorithm is None:
        return _jax_internals.cpu_lowering_rule(lax.linalg.eigh_p)(
            ctx, a, lower=lower, sort_eigenvalues=sort_eigenvalues,
            subset_by_index=subset_by_index, algorithm=algorithm)
    start, end = (0, n) if subset_by_index is None else subset_by_index

    def full_then_sliced(a):
        # LAPACK's eigenvalues are ascending whatever sort_eigenvalues says.
        v, w = lax.linalg.eigh(a, lower=lower, symmetrize_input=False)
        return v[..., start:end], w[..., start:end]

    return mlir.lower_fun(full_then_sliced, multiple_results=True)(ctx, a)


_SVD_ALGORITHMS = (None, lax.linalg.SvdAlgorithm.DEFAULT,
                   lax.linalg.SvdAlgorithm.DIVIDE_AND_CONQUER)


def _svd_rule(ctx, a, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    m, n = ctx.avals_in[0].shape[-2:]
    # JAX's CPU lowering exports gesdd only: its QR (gesvd) is not on jax.export's stable
    # list, Jacobi and Polar are not on CPU.
    if _whole(subset_by_index, min_dim(m, n)) and algorithm in _SVD_ALGORITHMS:
        return _jax_internals.cpu_lowering_rule(lax.linalg.svd_p)(
            ctx, a, full_matrices=full_matrices, compute_uv=compute_uv,
            subset_by_index=subset_by_index, algorithm=algorithm)
    start, end = (0, min_dim(m, n)) if subset_by_index is None else subset_by_index

    def full_then_sliced(a):
        if not compute_uv:
            return (lax.linalg.svd(a, full_matrices=False, compute_uv=False)[..., start:end],)
        u, s, vh = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
        if subset_by_index is None:
            return s, u, vh
        return s[..., start:end], u[..., start:end], vh[..., start:end, :]

    return mlir.lower_fun(full_then_sliced, multiple_results=True)(ctx, a)


def plain_lowering_rules(portable: tuple[tuple[Any, Any], ...]) -> tuple[tuple[Any, Any], ...]:
    """The `portable` rule table without cholesky and triangular_solve (JAX's CPU lowering:
    potrf, trsm) and with eigh and svd on JAX's CPU lowering (syevd/heevd, gesdd) for every
    parameter. Built once per `portable` table, so that its identity (part of JAX's lowering
    cache key) is stable.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jax2tf_native.linalg import portable_lowering_rules
        >>> from jax2tf_native.linalg.module_check import custom_call_targets
        >>> rules = plain_lowering_rules(portable_lowering_rules())
        >>> exported = jax.export.export(jax.jit(jnp.linalg.eigh), platforms=("cpu",),
        ...     _override_lowering_rules=rules)(np.eye(3, dtype=np.float32))
        >>> custom_call_targets(exported)
        ['lapack_ssyevd_ffi']
    """
    with _lock:
        if id(portable) not in _tables:
            lin = lax.linalg
            table = {p: r for p, r in portable
                     if p not in (lin.cholesky_p, lin.triangular_solve_p)}
            table[lin.eigh_p] = _eigh_rule
            table[lin.svd_p] = _svd_rule
            _tables[id(portable)] = tuple(table.items())
        return _tables[id(portable)]
