"""The exactness contract in code: when a converted result counts as equal to `jax.jit`'s.

One rule, used by the differential fuzzer (`tools/lax_fuzz`), `verify` and `tflite`
(`saved_model_tools/verify/compare.py`), and described in docs/exactness.md:

- booleans and integers (values, indices, argmax and sort order, random bits): bit-exact;
- floats, and the real and imaginary parts of complex numbers, compared component-wise:
  - NaN where the expected value is NaN, and only there (any NaN matches any NaN);
  - an infinity where the expected value is that infinity, and only there; the one exception,
    for results a tolerated difference allows to round differently, is a finite value within
    the bound of the overflow threshold against an infinity (`exp(88.72)` may round either
    side of float32's largest value);
  - where both are zero, the same sign (`-0.0` is not `+0.0`);
  - every other element within `Bound`: `|got - want| <= ulps * ulp(want) + scaled * eps *
    scale + atol + rtol * |want|`, where `ulp` and `eps` are those of the result's dtype and
    `scale` is what the caller knows about the magnitudes a result was summed from (the
    fuzzer passes `n * sum(|x|)` for a sum of `n` terms).

`EXACT` (all zero) is bit-exact up to NaN payloads. `TOLERANCES` lists every difference the
contract tolerates, with its bound and its reason; the fuzzer applies them by op family, and
`verify` applies the caller's `rtol`/`atol` with the same rule.

NumPy only: verify's child process, where JAX must not be imported, uses this module.
"""
from __future__ import annotations

import dataclasses

import numpy as np

# Mantissa bits (without the hidden bit), smallest normal exponent and largest finite value
# of the float types, by dtype name (bfloat16 and the float8s are ml_dtypes' types, which
# np.finfo does not know; reading them here keeps ml_dtypes out of the imports).
_FLOAT_FORMATS = {
    "float16": (10, -14, 65504.0),
    "bfloat16": (7, -126, 3.3895313892515355e38),
    "float32": (23, -126, 3.4028234663852886e38),
    "float64": (52, -1022, 1.7976931348623157e308),
    "float8_e4m3fn": (3, -6, 448.0),
    "float8_e4m3fnuz": (3, -7, 240.0),
    "float8_e4m3b11fnuz": (3, -10, 30.0),
    "float8_e5m2": (2, -14, 57344.0),
    "float8_e5m2fnuz": (2, -15, 57344.0),
}
_COMPONENT = {"complex64": "float32", "complex128": "float64"}


@dataclasses.dataclass(frozen=True)
class Bound:
    """How far a float element may be from the expected one (see the module docstring).

    Attributes:
      ulps: units in the last place of the expected value, in the result's dtype.
      scaled: multiples of `eps * scale` (eps: the dtype's distance from 1.0 to the next
        value), for results whose rounding depends on how terms were associated.
      rtol, atol: relative and absolute tolerance (verify's options), as in `np.allclose`.
      tiny: multiples of the dtype's smallest normal value: for results that one side
        flushes to zero where the other does not (subnormal intermediates).
      signed_zeros: whether -0.0 and +0.0 differ (the contract: they do, except where a
        tolerated difference says otherwise).
      overflow: whether, where `scale` is infinite (the terms themselves overflow), NaN,
        infinities and finite values may stand for one another.
      flush_subnormals: whether a subnormal value and a zero of the same sign are equal (the
        contract: they are; see `TOLERANCES["flush_to_zero"]`).
    """
    ulps: float = 0.0
    scaled: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    tiny: float = 0.0
    signed_zeros: bool = True
    overflow: bool = False
    flush_subnormals: bool = True

    @property
    def exact(self) -> bool:
        return not (self.ulps or self.scaled or self.rtol or self.atol or self.tiny)

    def widest(self, other: Bound) -> Bound:
        """The bound allowing both differences (for a value two tolerated paths reach)."""
        return Bound(max(self.ulps, other.ulps), max(self.scaled, other.scaled),
                     max(self.rtol, other.rtol), max(self.atol, other.atol),
                     max(self.tiny, other.tiny), self.signed_zeros and other.signed_zeros,
                     self.overflow or other.overflow,
                     self.flush_subnormals or other.flush_subnormals)


EXACT = Bound()


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """One tolerated difference of the contract: the bound and why it is tolerated."""
    bound: Bound
    reason: str


# Every tolerated difference, by op family: the largest difference the fuzzer measured
# (tools/lax_fuzz) on either path, XlaCallModule and plain, rounded up; measured values in
# each run's bounds.json under tools/results/fuzz/, the table with the reasons in
# docs/exactness.md.
_LIBM = ("jaxlib's XLA, TF's XLA and TF's Eigen kernels use different polynomial "
         "approximations (none is correctly rounded)")
TOLERANCES: dict[str, Tolerance] = {
    "flush_to_zero": Tolerance(Bound(), (
        "every float result: jaxlib's XLA, TF's XLA and TF's kernels all flush subnormals to "
        "zero, but not everywhere alike (TF's XLA keeps a subnormal quotient in a cond branch "
        "that jaxlib flushes; TF's Maximum keeps a subnormal operand XLA flushes)")),
    "libm": Tolerance(Bound(ulps=16, tiny=4), (
        "exp, exp2, log, log1p, expm1, tanh, logistic, sinh, cosh, asinh, acosh, atanh, asin, "
        "acos, atan, atan2, cbrt, rsqrt, erf, erfc, pow: " + _LIBM)),
    "erfc_tail": Tolerance(Bound(ulps=64, tiny=4), (
        "erfc: the plain lowering runs TF's Erfc kernel for JAX's polynomial (float16, "
        "bfloat16, float32); in float32 it is up to 58 ulps from jaxlib's where erfc is small "
        "(x > 3), measured on all 2**32 inputs by tools/kernel_bounds.py")),
    "libm_periodic": Tolerance(Bound(ulps=16, scaled=4, tiny=4), (
        "sin, cos, tan: " + _LIBM + "; the argument reduction rounds differently for large "
        "arguments; the scale (1, or 1 + tan**2) covers results near the zeros")),
    "special": Tolerance(Bound(ulps=256, scaled=16, tiny=4), (
        "lgamma, digamma, erf_inv, jax.random.normal: " + _LIBM + "; lgamma and digamma lose "
        "relative accuracy near their zeros (scale: 1 + the result)")),
    "complex_arith": Tolerance(Bound(ulps=16, scaled=8, tiny=4, signed_zeros=False), (
        "complex multiply, divide, abs, sign, exp, log, sqrt: XLA and TF form the parts with "
        "different formulas (scale: the magnitudes multiplied)")),
    "complex_reassociation": Tolerance(
        Bound(ulps=16, scaled=8, tiny=4, signed_zeros=False, overflow=True), (
            "complex dot_general, conv, sums, products and FFTs: as reassociation and "
            "complex_arith; where the products themselves overflow, jaxlib's and TF's XLA "
            "already disagree on NaN, infinity or a finite value")),
    "reassociation": Tolerance(Bound(scaled=4, tiny=4, signed_zeros=False), (
        "sums and products of many terms (reduce_sum, reduce_prod, cumsum, cumprod, "
        "cumlogsumexp, dot_general, conv, pooling sums, scatter-add and -multiply, FFTs): XLA "
        "and TF's kernels add in different orders; scale n * sum(|term|); a sum of zeros may "
        "be -0.0 or +0.0 depending on the order")),
    "excess_precision": Tolerance(Bound(ulps=1, scaled=1, tiny=4), (
        "float16 and bfloat16 chains: XLA computes them in float32 and may skip the rounding "
        "between fused ops (xla_allow_excess_precision), TF rounds every op to 16 bits; one "
        "rounding of each intermediate plus one ulp")),
    "fma_contraction": Tolerance(Bound(ulps=1, scaled=1, tiny=4), (
        "a float32/64 multiply followed by an add or subtract: XLA's CPU compiler fuses them "
        "into one fused multiply-add (one rounding), TF rounds the product first; one "
        "rounding of the product plus one ulp")),
    "derivative": Tolerance(Bound(scaled=64, tiny=4, signed_zeros=False, overflow=True), (
        "jax.jvp tangents and first- and second-order TF gradients: the backward pass sums "
        "cotangents in TF's and XLA's orders through every op; scale: the largest term the "
        "reference computation forms; whether a zero cotangent is added or skipped decides "
        "the sign of a zero; where the reference computation overflows (x * x past the largest "
        "value), the order decides between NaN (inf - inf, 0 * inf), an infinity and a finite "
        "value")),
}


def tolerance(*families: str) -> Bound:
    """The bound for a result that went through the given tolerated op families (EXACT for
    none). Raises KeyError for a family the contract does not list."""
    bound = EXACT
    for family in families:
        bound = bound.widest(TOLERANCES[family].bound)
    return bound


def describe(bound: Bound) -> str:
    """A bound in words, as docs/exactness.md's table gives it.

    Example:
        >>> describe(Bound(ulps=16, tiny=4))
        '16 ulps + 4 x smallest normal'
        >>> describe(EXACT)
        'bit-exact, but a subnormal equals a zero of its sign'
    """
    parts = []
    if bound.ulps:
        parts.append(f"{bound.ulps:g} ulps")
    if bound.scaled:
        parts.append(f"{bound.scaled:g} x eps x scale")
    if bound.rtol:
        parts.append(f"rtol {bound.rtol:g}")
    if bound.atol:
        parts.append(f"atol {bound.atol:g}")
    if bound.tiny:
        parts.append(f"{bound.tiny:g} x smallest normal")
    if not parts:
        return "bit-exact" + (", but a subnormal equals a zero of its sign"
                              if bound.flush_subnormals else "")
    text = " + ".join(parts)
    if not bound.signed_zeros:
        text += "; zero signs may differ"
    if bound.overflow:
        text += "; NaN/inf may differ where the terms overflow"
    return text


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of `compare`.

    Attributes:
      passed: every element is equal under the contract.
      kind: "" when passed, else what differs first: "shape", "dtype", "integer", "nan",
        "infinity", "signed_zero" or "value".
      mismatches: how many elements differ (for complex: either part).
      index: the index of the first (non-finite, sign) or worst (value) differing element.
      got, want: those elements (as Python scalars), None when passed.
      max_abs_error: the largest |got - want| where both are finite (0.0 when none).
      max_ulps: the largest |got - want| in ulps of the expected value, over finite elements
        whose difference the bound's `tiny` floor does not cover.
      max_scaled: the largest |got - want| / (eps * scale), over the same elements (0.0
        without a scale): what `Bound.scaled` must be for the differences seen.
      max_use: the largest |got - want| / (what the bound allows), over finite elements
        (inf where the bound allows no difference and there is one): <= 1 passes.
      detail: one line saying what differs, "" when passed.
    """
    passed: bool
    kind: str = ""
    mismatches: int = 0
    index: tuple = ()
    got: object = None
    want: object = None
    max_abs_error: float = 0.0
    max_ulps: float = 0.0
    max_scaled: float = 0.0
    max_use: float = 0.0
    detail: str = ""


def float_format(dtype) -> tuple[int, int, float]:
    """(mantissa bits, smallest normal exponent, largest finite value) of a float dtype."""
    name = np.dtype(dtype).name
    if name in _FLOAT_FORMATS:
        return _FLOAT_FORMATS[name]
    try:
        info = np.finfo(dtype)
    except (TypeError, ValueError):  # a float type neither numpy nor this table knows
        return _FLOAT_FORMATS["float32"]
    return int(info.nmant), int(info.minexp), float(info.max)


def ulp(values, dtype) -> np.ndarray:
    """The spacing of `dtype` at each |value| (float64 array): 2**(exponent - mantissa bits),
    and the smallest subnormal below the smallest normal value."""
    mant, min_exp, _ = float_format(dtype)
    magnitude = np.abs(np.asarray(values, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log2(magnitude))  # -inf at zero: the smallest subnormal's
    exponent = np.maximum(np.where(np.isnan(exponent) | np.isposinf(exponent), 0.0, exponent),
                          min_exp)
    return np.ldexp(1.0, (exponent - mant).astype(np.int64))


def compare(got, want, bound: Bound = EXACT, scale=None) -> Comparison:
    """Compares a converted result with the expected (`jax.jit`) one under the contract.

    Args:
      got: the converted result (numpy array or scalar).
      want: the expected result, of the same shape and dtype.
      bound: the tolerated float difference (`EXACT`, `tolerance(...)`, or verify's
        `Bound(rtol=..., atol=...)`); booleans and integers are always bit-exact.
      scale: for `bound.scaled`, the magnitudes the result was accumulated from, broadcast to
        its shape (a float array or scalar); None counts as the expected value's magnitude.

    Returns:
      A `Comparison`.

    Example:
        >>> import numpy as np
        >>> compare(np.float32([1.0, -0.0]), np.float32([1.0, 0.0])).detail
        '1 signed-zero element(s) differ; first at (1,): got -0, expected 0'
        >>> compare(np.float32([1.0000001]), np.float32([1.0]), tolerance("libm")).passed
        True
        >>> compare(np.int32([7, 8]), np.int32([7, 9]), Bound(rtol=0.5)).kind
        'integer'
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return _failed("shape", f"shape {list(got.shape)}, expected {list(want.shape)}")
    if got.dtype != want.dtype:
        return _failed("dtype", f"dtype {got.dtype}, expected {want.dtype}")
    if got.dtype.kind in "biu":
        return _compare_integers(got, want)
    if got.dtype.kind == "c":
        component = _COMPONENT[got.dtype.name]
        parts = [(np.real(got), np.real(want)), (np.imag(got), np.imag(want))]
        results = [_compare_floats(g, w, component, bound, scale) for g, w in parts]
        failed = [r for r in results if not r.passed]
        worst = failed[0] if failed else results[0]
        return dataclasses.replace(
            worst, mismatches=sum(r.mismatches for r in results),
            max_abs_error=max(r.max_abs_error for r in results),
            max_ulps=max(r.max_ulps for r in results),
            max_scaled=max(r.max_scaled for r in results),
            max_use=max(r.max_use for r in results),
            detail=worst.detail and (("real part: " if worst is results[0] else "imaginary part: ")
                                     + worst.detail))
    return _compare_floats(got, want, got.dtype.name, bound, scale)


def _failed(kind: str, detail: str) -> Comparison:
    return Comparison(False, kind, detail=detail)


def _scalar(array: np.ndarray, index: tuple):
    return array[index].item() if array.ndim else array.item()


def _first(mask: np.ndarray) -> tuple:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _compare_integers(got: np.ndarray, want: np.ndarray) -> Comparison:
    differ = got != want
    if not np.any(differ):
        return Comparison(True)
    index = _first(differ)
    count = int(np.count_nonzero(differ))
    g, w = _scalar(got, index), _scalar(want, index)
    return Comparison(False, "integer", count, index, g, w, detail=(
        f"{count} element(s) differ; first at {index}: got {g}, expected {w}"))


def _compare_floats(got, want, dtype: str, bound: Bound, scale) -> Comparison:
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want).astype(np.float64)
    mant, min_exp, largest = float_format(dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        inf_g, inf_w = np.isinf(g), np.isinf(w)
        finite = ~(nan_g | nan_w | inf_g | inf_w)
        diff = np.where(finite, np.abs(g - w), 0.0)
        units = ulp(np.where(finite, w, 0.0), dtype)
        allowed = (bound.ulps * units + bound.atol + bound.tiny * np.ldexp(1.0, min_exp)
                   + bound.rtol * np.abs(np.where(finite, w, 0.0)))
        scaled_units = np.zeros(g.shape)
        if bound.scaled or scale is not None:
            magnitude = np.abs(w) if scale is None else np.abs(
                np.broadcast_to(np.asarray(scale, np.float64), w.shape))
            scaled_units = np.ldexp(1.0, -mant) * np.where(np.isnan(magnitude), np.inf,
                                                           magnitude)
            allowed = allowed + bound.scaled * scaled_units
        allowed = np.where(finite, allowed, 0.0)
        use = np.where(diff > 0, diff / np.where(allowed > 0, allowed, 0.0), 0.0)
        scaled_use = np.where(diff > 0, diff / np.where(scaled_units > 0, scaled_units, 0.0),
                              0.0)
        value_bad = finite & (diff > allowed)
        if bound.flush_subnormals:  # a subnormal against a zero of its sign
            smallest_normal = np.ldexp(1.0, min_exp)
            flushed = finite & (np.signbit(g) == np.signbit(w)) & (
                ((g == 0) & (np.abs(w) < smallest_normal))
                | ((w == 0) & (np.abs(g) < smallest_normal)))
            value_bad &= ~flushed
        nan_bad = nan_g != nan_w
        inf_bad = ~nan_bad & (inf_g | inf_w) & (g != w)
        if not bound.exact:  # overflow boundary: a finite value within the bound of the largest
            edge = np.where(inf_g & np.isfinite(w), w, np.where(inf_w & np.isfinite(g), g, 0.0))
            near = np.abs(edge) + bound.ulps * ulp(largest, dtype) + bound.scaled * np.ldexp(
                1.0, -mant) * largest >= largest
            inf_bad &= ~(near & (np.sign(np.where(inf_g, g, w)) == np.sign(edge)))
        if bound.overflow and scale is not None:
            overflowed = np.isinf(np.broadcast_to(np.asarray(scale, np.float64), w.shape))
            nan_bad &= ~overflowed
            inf_bad &= ~overflowed
        zero_bad = (finite & (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
                    if bound.signed_zeros else np.zeros(g.shape, bool))
    # The ulps and the scaled part a difference needs, where the flush floor does not cover it.
    beyond_floor = diff > bound.tiny * np.ldexp(1.0, min_exp)
    measured = dict(max_abs_error=float(np.max(diff)) if diff.size else 0.0,
                    max_ulps=float(np.max(np.where(beyond_floor, diff / units, 0.0)))
                    if diff.size else 0.0,
                    max_scaled=float(np.max(np.where(beyond_floor, scaled_use, 0.0)))
                    if diff.size else 0.0,
                    max_use=float(np.max(use)) if diff.size else 0.0)
    count = int(np.count_nonzero(value_bad | nan_bad | inf_bad | zero_bad))
    if not count:
        return Comparison(True, **measured)
    for kind, mask, label in (("nan", nan_bad | inf_bad, "non-finite"),
                              ("signed_zero", zero_bad, "signed-zero")):
        if np.any(mask):
            index = _first(mask)
            n = int(np.count_nonzero(mask))
            g_i, w_i = _scalar(got, index), _scalar(want, index)
            if kind == "nan" and not (np.isnan(g[index]) or np.isnan(w[index])):
                kind = "infinity"
            return Comparison(False, kind, count, index, g_i, w_i, **measured, detail=(
                f"{n} {label} element(s) differ; first at {index}: got {_text(g_i)}, "
                f"expected {_text(w_i)}"))
    excess = np.where(value_bad, diff - allowed, -np.inf)
    index = _first(excess == np.max(excess))
    g_i, w_i = _scalar(got, index), _scalar(want, index)
    return Comparison(False, "value", count, index, g_i, w_i, **measured, detail=(
        f"{count} element(s) outside the bound; worst at {index}: got {_text(g_i)}, "
        f"expected {_text(w_i)} ({float(diff[index] / units[index]):.3g} ulps)"))


def _text(value) -> str:
    return f"{float(value):.6g}"  # keeps the sign of a zero: "-0"
