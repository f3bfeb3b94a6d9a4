"""Mismatch classes that are explained, though not tolerated by the contract.

- `KNOWN`: classes of the plain lowering known and being fixed (issue 35, branch h35-fix),
  then those this fuzzer found on main and reported (`FOUND`). Only plain-path mismatches
  match them. When a fix merges, drop its entry (all of `BEING_FIXED` once h35-fix is in):
  every recurrence is then unexplained, and the CI slice fails on it.
- `TF_XLA`: differences of TF's own XLA (what the XlaCallModule op compiles with) from
  jaxlib's XLA, on the same StableHLO. Only XlaCallModule-path mismatches match them; they
  are TF's, listed in docs/exactness.md with what would remove them.

Anything else is unexplained.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tools.lax_fuzz.check import Mismatch

# Sums and products whose terms overflow: the order decides between inf, NaN and a finite value.
_SUMS = {"reduce_sum", "reduce_prod", "cumsum", "cumprod", "dot_general", "conv",
         "reduce_window_sum", "reduce_window_avg", "scatter_add_clip", "scatter_add_drop",
         "scatter_add_None", "scatter_add_promise_in_bounds", "fft", "ifft", "rfft", "irfft",
         "fft2"}
_ARITH = {"add", "sub", "mul", "div", "square", "integer_pow3", "integer_pow_neg2",
          "reciprocal", "sqrt", "add_const", "sub_const", "mul_const", "iota_add", "mul_add",
          "mul_sub"}
_MINMAX = {"max", "min", "max_const", "clamp", "reduce_max", "reduce_min", "reduce_window_max",
           "reduce_window_min", "cummax", "cummin", "sort", "top_k"}


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


def _scatter_mul(m: Mismatch, ops: set) -> bool:
    return any(o.startswith("scatter_mul") for o in ops) and m.kind in ("infinity", "nan",
                                                                         "value")


BEING_FIXED: list[KnownClass] = [
    KnownClass("max-pool SAME-padding jvp ties",
               lambda m, ops: m.check != "value" and "reduce_window_max" in ops),
    KnownClass("reduce_precision subnormals",
               lambda m, ops: any(o.startswith("reduce_precision") for o in ops)),
    KnownClass("scatter-mul overflow order", _scatter_mul),
    KnownClass("complex sign underflow", lambda m, ops: "sign_complex" in ops),
    KnownClass("sign/cbrt/arcsinh of -0.0",
               lambda m, ops: m.kind == "signed_zero" and bool(ops & {"sign", "cbrt", "asinh"})),
    KnownClass("sum/prod overflow association",
               lambda m, ops: m.kind in ("infinity", "nan") and bool(ops & _SUMS)),
    KnownClass("f16 cumsum drift",
               lambda m, ops: m.dtype == "float16" and "cumsum" in ops),
    KnownClass("complex multiply overflow",
               lambda m, ops: m.kind in ("infinity", "nan") and "mul_complex" in ops),
    KnownClass("max(-0,+0)", lambda m, ops: m.kind == "signed_zero" and bool(ops & _MINMAX)),
    KnownClass("bf16 chains", lambda m, ops: m.dtype in ("bfloat16", "float16")
               and m.kind == "value" and bool(ops & _ARITH)),
    KnownClass("signed zeros from Grappler", lambda m, ops: m.kind == "signed_zero"),
]

_NAN_MINMAX = _MINMAX | {"scatter_max_clip", "scatter_max_drop", "scatter_max_None",
                        "scatter_max_promise_in_bounds", "scatter_min_clip", "scatter_min_drop",
                        "scatter_min_None", "scatter_min_promise_in_bounds"}
_BODIES = {"cond", "switch", "while_loop", "fori_loop"}
_COMPLEX_SPECIAL = {"abs_complex", "sign_complex", "sqrt_complex", "log_complex",
                    "exp_complex"}
_BITCASTS = lambda ops: any(o.startswith("bitcast_") for o in ops)

FOUND: list[KnownClass] = [
    KnownClass("1/x runs TF's approximate vectorized Reciprocal",
               lambda m, ops: bool(ops & {"reciprocal", "integer_pow_neg2"})
               and m.kind == "value"),
    KnownClass("Grappler turns a division by a constant in a cond/loop body into a multiply",
               lambda m, ops: bool(ops & _BODIES) and m.kind == "value"),
    KnownClass("complex divide by an infinity gives NaN",
               lambda m, ops: "div_complex" in ops and m.kind in ("nan", "infinity")),
    KnownClass("while_loop over a symbolic or empty dimension breaks TF's shape invariants",
               lambda m, ops: m.kind == "error" and bool(ops & {"while_loop", "fori_loop",
                                                                "scan"})),
    KnownClass("reduce_window whose dilated window is larger than the input fails at run time",
               lambda m, ops: m.kind == "error" and any(o.startswith("reduce_window")
                                                        for o in ops)),
    KnownClass("conv over symbolic spatial dimensions (None dims in TF): TypeError in the lowering",
               lambda m, ops: m.kind == "error" and bool(ops & {"conv", "conv_int"})),
    KnownClass("complex abs/sign/sqrt of infinite and NaN parts differ from jaxlib",
               lambda m, ops: bool(ops & _COMPLEX_SPECIAL) and m.kind in ("nan", "infinity")),
    KnownClass("max/min keep or flush a subnormal operand unlike XLA (denormals-are-zero)",
               lambda m, ops: m.kind == "value" and bool(ops & _NAN_MINMAX)
               and _subnormal_involved(m)),
    KnownClass("reduce_max/min gradient where the extremum is NaN",
               lambda m, ops: m.check != "value" and m.kind in ("nan", "infinity")
               and bool(ops & {"reduce_max", "reduce_min"})),
]

KNOWN: list[KnownClass] = BEING_FIXED + FOUND


TF_XLA: list[KnownClass] = [
    # Any kind: a dropped NaN changes what a later comparison, argmax or sort gives.
    KnownClass("TF's XLA: max/min drop NaN (fast min/max)",
               lambda m, ops: bool(ops & _NAN_MINMAX)),
    KnownClass("TF's XLA: complex abs/sign/sqrt of infinite and NaN parts differ from jaxlib",
               lambda m, ops: bool(ops & _COMPLEX_SPECIAL) and m.kind in ("nan", "infinity")),
    KnownClass("TF's XLA: shape refinement fails on a symbolic width-changing bitcast",
               lambda m, ops: m.kind == "error" and _BITCASTS(ops)),
]


def classify(mismatch: Mismatch, ops) -> str | None:
    """The explained class of a mismatch (`KNOWN` for the plain path, `TF_XLA` for the
    XlaCallModule path), or None."""
    ops = set(ops)
    for known in KNOWN if mismatch.path == "plain" else TF_XLA if mismatch.path == "xla" else ():
        if known.matches(mismatch, ops):
            return known.name
    return None


def new_class(mismatch: Mismatch, ops) -> str:
    """The name of an unexplained class: path, check, kind, dtype and the ops left after
    shrinking."""
    return (f"{mismatch.path} {mismatch.check} {mismatch.kind} {mismatch.dtype or '-'}: "
            f"{'+'.join(sorted(set(ops)))}")
