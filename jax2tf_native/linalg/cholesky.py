"""Cholesky (blocked, in JAX) and triangular solves (the HLO op), lowered portably."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import mlir as jex_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import chlo
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import mlir

from jax2tf_native.linalg.common import HIGHEST, batched


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
                -jnp.matmul(l21, jnp.conj(l21.T), precision=HIGHEST))
    return a


def _potrf_result(a, factored):
    """What JAX's LAPACK lowering returns: potrf's output, or all NaN on failure.

    potrf(uplo='L') writes L into the lower triangle and leaves the strict upper
    triangle as the input had it; JAX then replaces the whole matrix with NaN
    when potrf reports failure (a matrix that is not positive definite, or NaN).
    """
    lower = jnp.tril(factored)
    failed = jnp.any(jnp.isnan(lower))
    return jnp.where(failed, jnp.full_like(a, jnp.nan), lower + jnp.triu(a, 1))


def _cholesky_impl(a):
    def one(a):
        n = a.shape[-1]
        # The blocked loop unrolls over a static n; a symbolic n takes the rolled loop.
        factor = _cholesky_2d if isinstance(n, (int, np.integer)) else _cholesky_unblocked
        return _potrf_result(a, factor(a))

    return batched(one, a.ndim - 2)(a)


def _cholesky_rule(ctx, a):
    # XLA's own Cholesky expansion (stablehlo.cholesky) runs ~10x slower than
    # this on CPU (its unblocked part dominates; benchmarks/results/linalg.md).
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

