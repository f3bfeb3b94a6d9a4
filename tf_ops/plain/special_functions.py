"""Special functions: the CHLO ops JAX leaves in exported modules, as TF ops.

JAX 0.10 writes erf, sinh, cosh, asin, acos, asinh, acosh and atanh (real and complex) as
`stablehlo.composite "chlo.<name>"` ops whose `decomposition` attribute names a private
function of plain StableHLO ops in the same module; every other special function (erfc,
erf_inv, lgamma, digamma, igamma, igammac, igamma_grad_a, random_gamma_grad, bessel_i0e/i1e,
polygamma, zeta, nextafter, regularized_incomplete_beta, ...) JAX already expands into
StableHLO arithmetic before export.

A composite is lowered by calling its decomposition: that function is the op's definition
and what XLA itself runs for it, so the TF graph computes the same formula (and its accuracy)
op by op, where TF's own kernels (`tf.math.erf`, `tf.sinh`, ...) use other approximations
that differ from JAX by several ulps in the tails and for f16/bf16.
"""
from __future__ import annotations

from tf_ops.plain.program import Op


def composite(ctx, op: Op, *args):
    return ctx.call(op.attr("decomposition"), list(args))


def check_composite(op: Op):
    if not op.attr("decomposition"):
        return f"composite {op.attr('name', '?')!r} has no decomposition to lower"
    return None
