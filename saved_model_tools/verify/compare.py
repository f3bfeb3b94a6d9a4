"""How an output is compared with its expected value: the one rule `verify` and `tflite` share.

It is the exactness contract's rule (`tf_ops.exactness`, docs/exactness.md) with the caller's
`rtol`/`atol` as the float tolerance: booleans and integers are bit-exact; NaN matches NaN and
an infinity the same infinity, and any other value where either side is not finite is a
mismatch, whatever the tolerance (with the tolerance alone, `inf - inf` is NaN and equal
infinities would fail, and `|x - inf| <= atol + rtol * inf` holds, so a finite value or the
other infinity would pass against an infinity); zeros of opposite sign differ; the finite rest
compares within `atol + rtol * |expected|`, as `np.allclose` does.

NumPy only: this runs in verify's child process, where JAX must not be imported.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tf_ops import exactness


@dataclasses.dataclass(frozen=True)
class ValueComparison:
    """The outcome of `compare_values`.

    Attributes:
      passed: every element matched (see the module docstring).
      max_abs_error: max |got - expected| over the elements where both are finite (0.0 when
        there are none), so that a report stays finite JSON.
      detail: "" when passed; otherwise the first non-finite mismatch, or else the finite
        element furthest outside the tolerance, with its index and both values.
    """
    passed: bool
    max_abs_error: float
    detail: str


def compare_values(got, expected, rtol: float, atol: float) -> ValueComparison:
    """Compares two numeric arrays of one shape element by element.

    Args:
      got: the output (bool, integer, float or complex).
      expected: the value it must match, of the same shape.
      rtol, atol: the tolerance for finite elements.

    Returns:
      A `ValueComparison`.

    Example:
        >>> inf, nan = np.inf, np.nan
        >>> compare_values(np.array([-inf, nan, 1.0]), np.array([-inf, nan, 1.0 + 1e-9]),
        ...                rtol=1e-6, atol=1e-6).passed
        True
        >>> compare_values(np.array([-inf, 1.0]), np.array([inf, 1.0]), 1e-6, 1e-6).detail
        '1 non-finite element(s) differ; first at (0,): got -inf, expected inf'
    """
    compared = exactness.compare(got, expected, exactness.Bound(rtol=rtol, atol=atol))
    return ValueComparison(compared.passed, compared.max_abs_error, compared.detail)
