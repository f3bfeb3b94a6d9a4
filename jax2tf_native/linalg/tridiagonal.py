"""tridiagonal_solve: the Thomas algorithm (no pivoting, like JAX's own fallback)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jax.interpreters import mlir

from jax2tf_native.linalg.common import batched
from jax2tf_native.linalg.errors import raise_non_portable, require_static

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
    return batched(_thomas_2d, dl.ndim - 1)(dl, d, du, b)


def _tridiagonal_solve_rule(ctx, dl, d, du, b, *, perturb_singular=False):
    if perturb_singular:
        raise_non_portable(
            ctx, "tridiagonal_solve", "perturb_singular=True relies on LAPACK's "
            "gtsv pivoting", "Fix: pass perturb_singular=False.")
    require_static(ctx, "tridiagonal_solve", ctx.avals_in[0].shape[-1])
    return mlir.lower_fun(_tridiagonal_solve_impl, multiple_results=False)(
        ctx, dl, d, du, b)

