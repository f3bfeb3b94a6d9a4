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
                -jnp.matmul(l21, jnp.conj(l21.T), precision=HIGHEST))
    lower = jnp.tril(a)
    # LAPACK's contract, kept by JAX: a matrix that is not positive definite
    # gives NaN in the whole lower triangle, not just from the failing column.
    failed = jnp.any(jnp.isnan(lower))
    return jnp.where(failed, jnp.tril(jnp.full_like(lower, jnp.nan)), lower)


def _cholesky_impl(a):
    return batched(_cholesky_2d, a.ndim - 2)(a)


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

