"""Mismatch classes that are explained, though not tolerated by the contract.

- `KNOWN`: differences of the plain lowering that the contract tolerates because it runs TF's
  own kernels (`TF_KERNELS`), then those this fuzzer found and that are not fixed (`FOUND`).
  Only plain-path mismatches match them. The 11 classes of issue 35 are fixed (h35-fix) and
  have no entry: a recurrence is unexplained, and the CI slice fails on it.
- `TF_XLA`: differences of TF's own XLA (what the XlaCallModule op compiles with) from
  jaxlib's XLA, on the same StableHLO. Only XlaCallModule-path mismatches match them; they
  are TF's, listed in docs/exactness.md with what would remove them.

- `FIXED`: classes fixed during a committed run (its summary only).

Anything else is unexplained.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import ml_dtypes
import numpy as np

from tools.lax_fuzz.check import Mismatch

_MINMAX = {"max", "min", "max_const", "clamp", "reduce_max", "reduce_min", "reduce_window_max",
           "reduce_window_min", "cummax", "cummin", "sort", "top_k", "scan_max"}


@dataclasses.dataclass(frozen=True)
class KnownClass:
    """A known class: its name and which mismatches (with the program's op names) it covers."""
    name: str
    matches: Callable[[Mismatch, set], bool]


def _subnormal_involved(m: Mismatch) -> bool:
    """Either side is subnormal (below float32's and bfloat16's smallest normal)."""
    try:
        values = [float(m.want), float(m.got)]
    except ValueError:
        return False
    return any(0 < abs(v) < 2.0**-126 for v in values)


def _maxpool_floor(m: Mismatch) -> bool:
    """MaxPool's floor: -FLT_MAX (or the dtype's largest negative) for a window of -inf."""
    try:
        got, want = float(m.got), float(m.want)
    except ValueError:
        return False
    return want == float("-inf") and got < 0 and abs(got) > 6e4


def _within_ulps(m: Mismatch, ulps: float) -> bool:
    """Both sides finite and at most `ulps` apart, in ulps of the expected value (float32's
    unless the mismatch's dtype is narrower or float64)."""
    counted = re.search(r"\(([0-9.e+]+) ulps\)", m.detail)
    if counted:  # the comparison's own count (the detail's values are rounded)
        return float(counted.group(1)) <= ulps
    try:
        got, want = float(m.got), float(m.want)
    except ValueError:
        return False
    if not (np.isfinite(got) and np.isfinite(want)):
        return False
    dtype = {"float16": np.float16, "float64": np.float64}.get(m.dtype, np.float32)
    if m.dtype == "bfloat16":
        spacing = float(np.spacing(np.float32(want))) * 2.0**16
    else:
        spacing = float(np.spacing(dtype(abs(want))))
    return abs(got - want) <= ulps * spacing


def _overflow_seen(m: Mismatch) -> bool:
    """One side is an infinity, or NaN against an infinity or a value near the largest
    finite one (the trace of an overflowed product; a NaN against a small value is not)."""
    try:
        got, want = float(m.got), float(m.want)
    except ValueError:
        return False
    if np.isinf(got) or np.isinf(want):
        return True
    other = want if np.isnan(got) else got
    return bool(np.isfinite(other) and abs(other) > 1e30)


_RELU_LAYERS = {f"{kind}_layer_{act}" for kind in ("dense", "conv") for act in ("relu", "relu6")}


def _relu_of_overflow(m: Mismatch) -> bool:
    """Expected NaN, got a ReLU's floor or ReLU6's ceiling, where the magnitude is past the
    dtype's largest finite value (a NaN input makes it NaN)."""
    try:
        got, want, scale = float(m.got), float(m.want), float(m.scale)
    except ValueError:
        return False
    largest = float(ml_dtypes.finfo(m.dtype).max) if m.dtype else np.inf
    return bool(np.isnan(want) and got in (0.0, 6.0) and scale >= largest)


_EXP_OF_NAN_CONSTANT = ("jaxlib's XLA: exp of a NaN constant (x + NaN, NaN padding) is a finite "
                        "value, not NaN")


def _exp_of_nan_constant(ops) -> bool:
    return bool(ops & {"exp", "cosh", "sinh"}) and bool(ops & {"add_const", "pad"})


def _nan_for_finite(m: Mismatch) -> bool:
    """One side is NaN, the other finite."""
    try:
        got, want = float(m.got), float(m.want)
    except ValueError:
        return False
    return bool(np.isnan(got) and np.isfinite(want) or np.isnan(want) and np.isfinite(got))


# Differences the contract tolerates because the plain lowering raises JAX's decompositions to
# TF's own kernels (what a TF engineer writes, and what TFLite, TF.js and Core ML fuse):
# docs/exactness.md#tolerated-differences-of-the-plain-lowerings-tf-kernels.
TF_KERNELS: list[KnownClass] = [
    KnownClass("TF's Relu and MaxPool: the sign of a zero where -0.0 and +0.0 tie",
               lambda m, ops: m.kind == "signed_zero"
               and bool(ops & {"max_const", "reduce_window_max"})),
    KnownClass("TF's MaxPool: a window of only -inf inputs gives the dtype's lowest finite",
               lambda m, ops: m.kind == "infinity" and "reduce_window_max" in ops
               and _maxpool_floor(m)),
    KnownClass("TF's Conv and MatMul kernels: where a product overflows, fused multiply-adds "
               "decide between NaN, an infinity and a finite value",
               lambda m, ops: m.kind in ("infinity", "nan")
               and bool(ops & {"conv", "conv_layer", "dot_general"}) and _overflow_seen(m)),
    # The same behind a layer's ReLU: XLA's NaN stays NaN, TF's -inf becomes 0 (ReLU6: 0 or
    # 6). Told from a ReLU that drops a NaN input by the magnitude there: past the dtype's
    # largest finite (a product overflowed), where a NaN input makes it NaN.
    KnownClass("TF's Conv and MatMul kernels behind a ReLU: where a product overflows, XLA's "
               "NaN against TF's infinity, which the ReLU makes 0 or 6",
               lambda m, ops: m.kind == "nan" and bool(ops & _RELU_LAYERS)
               and _relu_of_overflow(m)),
    KnownClass("Grappler: x / constant runs as x * (1 / constant), within 1.5 ulps",
               lambda m, ops: m.kind == "value" and "div" in ops and _within_ulps(m, 1.5)),
]

_NAN_MINMAX = _MINMAX | {"scatter_max_clip", "scatter_max_drop", "scatter_max_None",
                        "scatter_max_promise_in_bounds", "scatter_min_clip", "scatter_min_drop",
                        "scatter_min_None", "scatter_min_promise_in_bounds"}
_BODIES = {"cond", "switch", "while_loop", "fori_loop"}
_COMPLEX_SPECIAL = {"abs_complex", "sign_complex", "sqrt_complex", "log_complex",
                    "exp_complex"}
_BITCASTS = lambda ops: any(o.startswith("bitcast_") for o in ops)

FOUND: list[KnownClass] = [
    KnownClass("Grappler turns a division by a constant in a cond/loop body into a multiply",
               lambda m, ops: bool(ops & _BODIES) and m.kind == "value"),
    KnownClass("complex divide by an infinity gives NaN",
               lambda m, ops: "div_complex" in ops and m.kind in ("nan", "infinity")),
    KnownClass("complex abs/sign/sqrt of infinite and NaN parts differ from jaxlib",
               lambda m, ops: bool(ops & _COMPLEX_SPECIAL) and m.kind in ("nan", "infinity")),
    KnownClass("max/min keep or flush a subnormal operand unlike XLA (denormals-are-zero)",
               lambda m, ops: m.kind == "value" and bool(ops & _NAN_MINMAX)
               and _subnormal_involved(m)),
    KnownClass("conv: an infinite or NaN kernel element over padding: one side multiplies "
               "the padding's zeros (NaN), the other skips them",
               lambda m, ops: m.kind == "nan" and "conv" in ops and _nan_for_finite(m)),
    KnownClass("XLA simplifies rsqrt(x**-2) to |x|; TF computes x**-2 (0 past 1.8e19) first",
               lambda m, ops: {"integer_pow_neg2", "rsqrt"} <= ops
               and m.kind in ("infinity", "value")),
    KnownClass("outside the contract: a subnormal (nextafter of 0) into a tolerated function "
               "(TF's kernels treat it as 0, atan2(1e-45, 0) = pi/4)",
               lambda m, ops: m.kind == "value" and "nextafter" in ops
               and bool(m.families)),
    # The zero is one XLA's simplifier can see: an iota over a size-1 dimension, or a scan's
    # zero initial carry once XLA unrolls a one-step loop (a float64 scan of [-5e-324]).
    KnownClass("x + 0 for a negative subnormal x, the 0 an iota over a size-1 dimension or a "
               "scan's initial carry: XLA's x + 0 -> x keeps its sign, TF's add "
               "(denormals-are-zero) gives +0",
               lambda m, ops: bool(ops & {"iota_add", "scan"})
               and m.kind in ("value", "signed_zero") and _subnormal_involved(m)),
    # Either form of the inner 1 / y: a single 1 / y is exact since the lowering divides -1 by
    # y (so two reciprocals alone, 1 / (1 / y), are this class too).
    KnownClass("XLA simplifies 1 / (1 / y) to y; TF rounds both divisions (1 ulp)",
               lambda m, ops: "reciprocal" in ops
               and ("integer_pow_neg2" in ops or ops == {"reciprocal"})
               and m.kind == "value" and _within_ulps(m, 2)),
    KnownClass("float16 x * y - z: XLA keeps the product in float32 where it overflows "
               "float16, TF rounds it to inf",
               lambda m, ops: m.dtype == "float16" and m.kind in ("infinity", "nan")
               and bool(ops & {"mul_sub", "mul_add"})),
    # jax.jit's own value is wrong: exp of NaN alone is NaN, but fused after a NaN constant
    # (x + NaN, or NaN padding: lax.pad's value) jaxlib's XLA gives finite values that vary
    # from call to call of one compiled function (1e-45, -6.8e10, 2.3e38; float32 and
    # bfloat16; cosh and sinh are exps); TF gives NaN.
    KnownClass(_EXP_OF_NAN_CONSTANT,
               lambda m, ops: _exp_of_nan_constant(ops) and _nan_for_finite(m)),
    KnownClass("reduce_max/min gradient where the extremum is NaN",
               lambda m, ops: m.check != "value" and m.kind in ("nan", "infinity")
               and bool(ops & {"reduce_max", "reduce_min"})),
]

KNOWN: list[KnownClass] = TF_KERNELS + FOUND

# Classes fixed while a committed run went on, with when the fix reached the worktree the run
# read (unix time): the run's summary names a finding of a worker started before then as
# fixed, one of a worker started after as unexplained. Neither the workers nor the CI slice
# read this list.
FIXED: list[tuple[KnownClass, float, str]] = [
    (KnownClass("1/x ran TF's approximate vectorized Reciprocal (3 ulps; 4,907 for |x| > 2**100)",
                lambda m, ops: bool(ops & {"reciprocal", "integer_pow_neg2", "div"})
                and m.kind == "value"),
     1795897482.0, "plain lowering: 1 / y as -(-1 / y), which Grappler keeps a division"),
    (KnownClass("folding an empty constant failed in TF's MakeNdarray (index can't contain "
                "negative values)",
                lambda m, ops: m.kind == "error" and "negative values" in m.detail),
     1795898618.0, "plain lowering: folding reads empty constants itself"),
    (KnownClass("float64 cbrt was pow(|x|, 1/3), 116 ulps from jaxlib's",
                lambda m, ops: m.kind == "value" and m.dtype == "float64" and "cbrt" in ops),
     1795898864.0, "plain lowering: cbrt takes one Newton step after pow"),
    (KnownClass("two width-changing bitcasts in a row: TF's optimizer merged them (shape [8] "
                "for [4, 2])",
                lambda m, ops: m.kind == "shape"
                and sum(o.startswith("bitcast_") for o in ops) >= 2),
     1795899538.0, "plain lowering: refused (PlainLoweringError)"),
    (KnownClass("complex reduce_prod whose terms overflow, measured against the magnitude "
                "of the product (NaN) instead of the product of the magnitudes (inf)",
                lambda m, ops: m.kind in ("nan", "infinity") and "reduce_prod" in ops
                and "complex_reassociation" in m.families),
     1795899702.0, "lax_fuzz: reduce_prod's scale is the product of the magnitudes"),
    (KnownClass("complex x + x: TF's optimizer made it 2 * x, losing a -0.0 imaginary part",
                lambda m, ops: m.kind == "signed_zero"
                and m.dtype in ("complex64", "complex128") and ops == {"add"}),
     1795900125.0, "plain lowering: complex x + x adds the parts"),
    (KnownClass("a derivative where the reference computation overflows (acosh'' at -FLT_MAX: "
                "0 * inf); tolerated since by the derivative bound",
                lambda m, ops: m.check != "value" and m.kind == "nan" and ops == {"acosh"}),
     1795897627.0, "contract: the derivative bound's overflow rule, scales.py marks the overflow"),
]


# Worker crashes explained by rerunning their batch (seed, batch index): the crash is not in a
# converted path.
CRASHES: dict[tuple[int, int], str] = {
    (0, 51): "jaxlib's XLA (the reference, jax.jit) dies of SIGFPE compiling "
             "lax.div(x ^ x, x ^ x) on integers: it folds the integer 0 / 0 on the host",
}


TF_XLA: list[KnownClass] = [
    # Any kind: a dropped NaN changes what a later comparison, argmax or sort gives.
    KnownClass("TF's XLA: max/min drop NaN (fast min/max)",
               lambda m, ops: bool(ops & _NAN_MINMAX)
               # runs recorded before scan's max step had its own name ("scan_max")
               or (m.kind == "nan" and "scan" in ops)),
    KnownClass("TF's XLA and " + _EXP_OF_NAN_CONSTANT,
               lambda m, ops: _exp_of_nan_constant(ops) and m.kind in ("value", "nan")),
    KnownClass("TF's XLA: complex abs/sign/sqrt of infinite and NaN parts differ from jaxlib",
               lambda m, ops: bool(ops & _COMPLEX_SPECIAL) and m.kind in ("nan", "infinity")),
    # Its derivative, ans ** -2 / 3 in JAX's rule, doubles the relative error (221 ulps seen).
    KnownClass("TF's XLA: float64 cbrt is pow(|x|, 1/3), up to 116 ulps from jaxlib's",
               lambda m, ops: m.kind == "value" and m.dtype == "float64" and "cbrt" in ops
               and _within_ulps(m, 128 if m.check == "value" else 256)),
    KnownClass("TF's XLA: shape refinement fails on a symbolic width-changing bitcast",
               lambda m, ops: m.kind == "error" and _BITCASTS(ops)),
]


def classify(mismatch: Mismatch, ops) -> str | None:
    """The explained class of a mismatch (`KNOWN` for the plain path, `TF_XLA` for the
    XlaCallModule path), or None."""
    ops = _with_layer_parts(set(ops))
    for known in KNOWN if mismatch.path == "plain" else TF_XLA if mismatch.path == "xla" else ():
        if known.matches(mismatch, ops):
            return known.name
    return None


def _with_layer_parts(ops: set) -> set:
    """A generated layer (`dense_layer_relu`, `conv_layer_linear`, ...) also counts as its
    product (`dot_general`, or `conv_layer`: its kernel is finite, so the class of an infinite
    kernel over padding does not cover it) and, with a ReLU, as `max_const` (max(x, 0))."""
    for op in list(ops):
        kind, _, act = op.partition("_layer_")
        if act:
            ops.add({"dense": "dot_general", "conv": "conv_layer"}[kind])
            if act in ("relu", "relu6"):
                ops.add("max_const")
    return ops


def new_class(mismatch: Mismatch, ops) -> str:
    """The name of an unexplained class: path, check, kind, dtype and the ops left after
    shrinking."""
    return (f"{mismatch.path} {mismatch.check} {mismatch.kind} {mismatch.dtype or '-'}: "
            f"{'+'.join(sorted(set(ops)))}")
