"""Special functions in the plain lowering: JAX's CHLO composites (erf, sinh, asin, ...) run their
decompositions, and the functions JAX expands itself lower through the elementwise ops; values
across the domain (tails, infinities, NaN) equal JAX's."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered

# Tails, signed zeros, infinities, NaN and the points where the formulas switch branches.
X = np.array([-30.0, -4.5, -3.0, -1.0, -0.999, -0.5, -1e-20, -0.0, 0.0, 1e-20, 0.3, 0.5, 0.999,
              1.0, 1.5, 3.0, 4.5, 9.0, 30.0, 89.0, 1e30, np.inf, -np.inf, np.nan], np.float32)


def _composites(x):
    return (lax.erf(x), lax.sinh(x), lax.cosh(x), lax.asin(x), lax.acos(x), lax.asinh(x),
            lax.acosh(x), lax.atanh(x))


def _expanded(x):
    return (lax.erfc(x), lax.erf_inv(x), lax.lgamma(x), lax.digamma(x), lax.bessel_i0e(x),
            lax.bessel_i1e(x), lax.nextafter(x, jnp.zeros_like(x)), jnp.isposinf(x))


def test_chlo_composites_run_their_decompositions():
    """Composites run their decompositions, except those raised to a TF kernel measured within
    the contract's bound (erf: TF's Erf)."""
    program = lowered(_composites, [X])
    names = {op.attr("name") for op in program.ops() if op.name == "stablehlo.composite"}
    assert {"chlo.sinh", "chlo.asin", "chlo.atanh"} <= names
    kernels = {op.attr("kernel") for op in program.ops() if op.name == "raised.unary"}
    assert kernels == {"Erf"}
    assert_lowers_like_jax(_composites, X, polymorphic_shapes=["n"], rtol=1e-6, atol=1e-7)


def test_special_functions_across_the_domain():
    # atol 3e-7, two ulps of 1.0: lgamma's terms near its roots at 1 and 2 are about 1 and
    # cancel, and in a graph TF's optimizer turns each division by a constant into a product
    # with the reciprocal (within 1.5 ulps of the quotient; docs/exactness.md).
    assert_lowers_like_jax(_expanded, X, rtol=1e-6, atol=3e-7)
    with jax.enable_x64(True):
        assert_lowers_like_jax(lambda x: (_composites(x), lax.erf_inv(x), lax.lgamma(x)),
                               X.astype(np.float64), rtol=1e-12, atol=1e-14)


def test_half_precision_special_functions():
    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = np.clip(X, -60000, 60000).astype(dtype)
        assert_lowers_like_jax(lambda x: (lax.erf(x), lax.sinh(x), lax.asin(x), lax.erf_inv(x),
                                          lax.lgamma(x), lax.digamma(x)), x, rtol=1e-2,
                               atol=1e-2)


def test_complex_inverse_trigonometric_and_hyperbolic():
    re, im = np.meshgrid([-3.0, -0.5, 0.0, 0.7, 2.0, 1e20], [-2.0, 0.0, 0.3, 1e-20])
    z = (re + 1j * im).ravel().astype(np.complex64)
    assert_lowers_like_jax(lambda z: (lax.asin(z), lax.acos(z), lax.asinh(z), lax.acosh(z),
                                      lax.atanh(z), lax.atan(z), lax.sinh(z), lax.cosh(z)), z,
                           rtol=1e-5, atol=1e-6)


def test_incomplete_gamma_and_polygamma():
    a = np.array([0.5, 1.0, 2.5, 10.0, 0.1, 30.0], np.float32)
    x = np.array([0.3, 1.0, 2.0, 12.0, 1e-3, 25.0], np.float32)
    assert_lowers_like_jax(lambda a, x: (lax.igamma(a, x), lax.igammac(a, x),
                                         lax.polygamma(jnp.float32(1), x)),
                           a, x, rtol=1e-5, atol=1e-6)
