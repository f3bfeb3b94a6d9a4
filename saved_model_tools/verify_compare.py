"""How an output is compared with its expected value: the one rule `verify` and `tflite` share.

Non-finite values compare by position: NaN matches NaN, and an infinity the same infinity. Any
other value where either side is not finite is a mismatch, whatever the tolerance: with the
tolerance alone, `inf - inf` is NaN (equal infinities would fail) and `|x - inf| <= atol +
rtol * inf` holds (a finite value, or the other infinity, would pass against an infinity). The
finite rest compares within `atol + rtol * |expected|`, as `np.allclose` does.

NumPy only: this runs in verify's child process, where JAX must not be imported.
"""
from __future__ import annotations

import dataclasses

import numpy as np


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
    got, expected = np.asarray(got), np.asarray(expected)
    wide = np.complex128 if "c" in (got.dtype.kind, expected.dtype.kind) else np.float64
    got64, want64 = got.astype(wide), expected.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
        finite = np.isfinite(got64) & np.isfinite(want64)
        diff = np.where(finite & ~same, np.abs(got64 - want64), 0.0)
        excess = np.where(finite, diff - (atol + rtol * np.abs(want64)), 0.0)
    non_finite_mismatch = ~same & ~finite
    failed = non_finite_mismatch | (excess > 0)
    max_abs_error = float(np.max(diff)) if diff.size else 0.0
    if not np.any(failed):
        return ValueComparison(True, max_abs_error, "")
    if np.any(non_finite_mismatch):
        where = np.unravel_index(int(np.argmax(non_finite_mismatch)), got64.shape)
        prefix = (f"{int(np.count_nonzero(non_finite_mismatch))} non-finite element(s) differ; "
                  f"first")
    else:
        where = np.unravel_index(int(np.argmax(np.where(failed, excess, -np.inf))), got64.shape)
        prefix = "worst"
    return ValueComparison(False, max_abs_error, (
        f"{prefix} at {tuple(int(i) for i in where)}: got {got64[where]:.6g}, "
        f"expected {want64[where]:.6g}"))
