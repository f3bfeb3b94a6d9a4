"""The exactness contract's rule (tf_ops/exactness.py), and its page (docs/exactness.md)
listing every tolerated difference with the bound the code applies."""
import pathlib
import re

import ml_dtypes
import numpy as np
import pytest

from tf_ops import exactness
from tf_ops.exactness import Bound, compare

INF, NAN = np.inf, np.nan
PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "exactness.md"


def test_integers_and_booleans_are_bit_exact_whatever_the_tolerance():
    loose = Bound(rtol=1.0, atol=10.0, ulps=100)
    result = compare(np.int32([5, -2**31, 7]), np.int32([5, -2**31, 8]), loose)
    assert (result.passed, result.kind, result.mismatches, result.index) == (
        False, "integer", 1, (2,))
    assert result.detail == "1 element(s) differ; first at (2,): got 7, expected 8"
    assert compare(np.uint64([2**64 - 1]), np.uint64([2**64 - 1])).passed
    assert not compare(np.array([True, False]), np.array([True, True]), loose).passed


def test_shape_and_dtype_must_match():
    assert compare(np.zeros(3, np.float32), np.zeros(4, np.float32)).kind == "shape"
    assert compare(np.zeros(3, np.float32), np.zeros(3, np.float64)).detail == \
        "dtype float32, expected float64"


@pytest.mark.parametrize("got, want, kind", [
    ([NAN, 1.0], [1.0, 1.0], "nan"),
    ([1.0, 1.0], [NAN, 1.0], "nan"),
    ([-INF, 1.0], [INF, 1.0], "infinity"),
    ([3e38, 1.0], [INF, 1.0], "infinity"),
    ([-0.0, 1.0], [0.0, 1.0], "signed_zero"),
])
def test_special_values_are_exact_even_within_a_tolerance(got, want, kind):
    result = compare(np.float32(got), np.float32(want), Bound(rtol=1e-3, atol=1e-3))
    assert (result.passed, result.kind, result.index) == (False, kind, (0,))


def test_any_nan_matches_any_nan():
    quiet = np.float32([NAN, -NAN])
    payload = np.array([0x7FC00001, 0xFFC00000], np.uint32).view(np.float32)
    assert compare(payload, quiet).passed


def test_exact_is_bit_exact_and_ulps_count_in_the_result_dtype():
    one = np.float32(1.0)
    above = np.nextafter(one, np.float32(2))
    assert not compare(np.float32([above]), np.float32([one])).passed
    result = compare(np.float32([above]), np.float32([one]), Bound(ulps=1))
    assert result.passed and result.max_ulps == 1.0
    # bfloat16's ulp at 1.0 is 2**-7: one step up is one ulp, two steps are two.
    b1 = np.array([1.0, 1.0], ml_dtypes.bfloat16)
    b2 = np.array([1.0078125, 1.015625], ml_dtypes.bfloat16)
    assert compare(b2, b1, Bound(ulps=1)).kind == "value"
    assert compare(b2, b1, Bound(ulps=2)).max_ulps == 2.0


def test_ulp_below_the_smallest_normal_is_the_smallest_subnormal():
    assert exactness.ulp(0.0, np.float32) == np.float32(2**-149)
    assert exactness.ulp(1e-40, np.float32) == 2.0**-149
    assert exactness.ulp(3.0, np.float16) == 2.0**-9
    assert exactness.ulp([1.0, 2.0], np.float64).tolist() == [2.0**-52, 2.0**-51]


def test_a_subnormal_equals_a_zero_of_its_sign():
    sub = np.float32(1e-40)
    assert compare(np.float32([sub, -sub]), np.float32([0.0, -0.0])).passed
    assert compare(np.float32([0.0]), np.float32([sub])).passed
    assert compare(np.float32([-0.0]), np.float32([sub])).kind == "value"  # not its sign
    assert compare(np.float32([0.0]), np.float32([1.2e-38])).kind == "value"  # a normal
    strict = Bound(flush_subnormals=False)
    assert compare(np.float32([sub]), np.float32([0.0]), strict).kind == "value"


def test_tiny_allows_a_flushed_result_near_the_smallest_normal():
    tiny = float(np.finfo(np.float32).tiny)
    got, want = np.float32([0.0]), np.float32([1.5 * tiny])
    assert not compare(got, want, Bound(ulps=4)).passed
    assert compare(got, want, Bound(ulps=4, tiny=4)).passed


def test_scaled_bound_counts_eps_times_the_scale():
    eps = 2.0**-23
    want = np.float32([1e-3])  # a sum of large terms that cancelled
    got = np.float32([1e-3 + 50 * eps])
    assert not compare(got, want, Bound(ulps=4)).passed
    result = compare(got, want, Bound(scaled=1), scale=np.float32([100.0]))
    assert result.passed and 0.4 < result.max_scaled < 0.6
    assert not compare(got, want, Bound(scaled=1), scale=np.float32([10.0])).passed


def test_overflow_boundary_and_overflowed_terms():
    big = np.float32(3.4028235e38)
    # exp(88.72): either side of the largest float32 within a few ulps.
    assert compare(np.float32([INF]), np.float32([big]), Bound(ulps=4)).passed
    assert not compare(np.float32([INF]), np.float32([big])).passed
    assert not compare(np.float32([INF]), np.float32([1e38]), Bound(ulps=4)).passed
    # where the terms themselves overflow, `overflow` lets special values differ
    got, want = np.float32([NAN, 1.0]), np.float32([3.7e36, 1.0])
    scale = np.float32([INF, 1.0])
    assert not compare(got, want, Bound(scaled=4), scale).passed
    assert compare(got, want, Bound(scaled=4, overflow=True), scale).passed


def test_signed_zeros_can_be_waived_by_a_tolerance():
    got, want = np.float32([0.0]), np.float32([-0.0])
    assert compare(got, want, exactness.tolerance("reassociation")).passed
    assert not compare(got, want, exactness.tolerance("libm")).passed


def test_complex_parts_compare_separately():
    got = np.array([complex(1.0, -0.0), complex(INF, 2.0)], np.complex64)
    want = np.array([complex(1.0, 0.0), complex(INF, 2.0)], np.complex64)
    result = compare(got, want)
    assert result.kind == "signed_zero" and result.detail.startswith("imaginary part: ")
    nan_real = np.array([complex(NAN, 1.0)], np.complex64)
    assert compare(nan_real, np.array([complex(NAN, 1.0)], np.complex64)).passed
    assert compare(nan_real, np.array([complex(1.0, NAN)], np.complex64)).kind == "nan"


def test_tolerance_combines_families_and_refuses_unknown_ones():
    both = exactness.tolerance("libm", "reassociation")
    assert both.ulps == exactness.TOLERANCES["libm"].bound.ulps
    assert both.scaled == exactness.TOLERANCES["reassociation"].bound.scaled
    assert not both.signed_zeros  # one of the two waives it
    assert exactness.tolerance() == exactness.EXACT
    with pytest.raises(KeyError):
        exactness.tolerance("close_enough")


def test_measurements_report_the_largest_difference():
    want = np.float32([1.0, 2.0, 4.0])
    got = want.copy()
    got[2] = np.nextafter(got[2], np.float32(8), dtype=np.float32)
    got[2] = np.nextafter(got[2], np.float32(8), dtype=np.float32)
    result = compare(got, want, Bound(ulps=4))
    assert result.passed and result.max_ulps == 2.0 and result.max_use == 0.5
    assert result.max_abs_error == pytest.approx(2 * 2.0**-21)


def test_the_page_lists_every_tolerated_difference_with_its_bound():
    text = PAGE.read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", text,
                                                        re.MULTILINE)}
    assert set(rows) == set(exactness.TOLERANCES), sorted(set(rows) ^ set(exactness.TOLERANCES))
    for name, tolerance in exactness.TOLERANCES.items():
        assert rows[name].strip() == exactness.describe(tolerance.bound), name
