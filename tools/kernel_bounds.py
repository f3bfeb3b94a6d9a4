"""How far TF's own kernels are from JAX on every input: the bounds behind the plain lowering's
raised special functions (tf_ops/plain/rewrite/kernels.py) and the exactness contract
(docs/exactness.md).

For each one-argument function and float type, every value of the type is fed to `jax.jit`
of the JAX primitive and to the TF kernel the plain lowering uses instead (float16 and
bfloat16: all 65,536 bit patterns; float32: all 2**32, in chunks, or every k-th with
`--stride k` for a quick look). The report gives, per function and type, the largest
difference in units in the last place (ulps, counted between the two results' positions in
the type's ordered values), where it occurs, and whether NaN, infinities and signed zeros
agree bit for bit.

Run: `python -m tools.kernel_bounds [--functions erfc,erf] [--dtypes float32] [--stride 1]
[--write]` (writes tools/results/kernel_bounds.md and .json; a full float32 run of one
function takes a few minutes on one core).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

FUNCTIONS = {
    "erfc": (jax.lax.erfc, tf.math.erfc),
    "erf": (jax.lax.erf, tf.math.erf),
    "erf_inv": (jax.lax.erf_inv, tf.math.erfinv),
    "lgamma": (jax.lax.lgamma, tf.math.lgamma),
    "digamma": (jax.lax.digamma, tf.math.digamma),
    "logistic": (jax.lax.logistic, tf.math.sigmoid),
    "tanh": (jax.lax.tanh, tf.math.tanh),
    "exp": (jax.lax.exp, tf.math.exp),
    "log": (jax.lax.log, tf.math.log),
    "sinh": (jax.numpy.sinh, tf.math.sinh),
    "cosh": (jax.numpy.cosh, tf.math.cosh),
    "asinh": (jax.numpy.arcsinh, tf.math.asinh),
    "acosh": (jax.numpy.arccosh, tf.math.acosh),
    "atanh": (jax.numpy.arctanh, tf.math.atanh),
    "asin": (jax.numpy.arcsin, tf.math.asin),
    "acos": (jax.numpy.arccos, tf.math.acos),
}
DTYPES = {"float16": (np.float16, np.uint16, np.int16),
          "bfloat16": (ml_dtypes.bfloat16, np.uint16, np.int16),
          "float32": (np.float32, np.uint32, np.int32)}


def ordered(x: np.ndarray, int_type) -> np.ndarray:
    """Each float's position among the type's values, as int64 (+0 and -0 both at 0)."""
    bits = x.view(int_type).astype(np.int64)
    return np.where(bits < 0, -(bits & np.iinfo(int_type).max), bits)


def _tiny(dtype) -> float:
    return float(ml_dtypes.finfo(dtype).smallest_normal)


def compare(want: np.ndarray, got: np.ndarray, int_type) -> dict:
    """Ulp distance and special-value agreement of `got` against `want` (same dtype).

    Where one side is subnormal and the other is a zero of the same sign, or both are
    subnormal, the difference is counted as a flush (XLA's CPU backend and TF's kernels flush
    subnormals in different places), not in ulps."""
    want_nan, got_nan = np.isnan(want.astype(np.float32)), np.isnan(got.astype(np.float32))
    tiny = _tiny(want.dtype)
    flushed = (np.abs(want.astype(np.float64)) < tiny) & (np.abs(got.astype(np.float64)) < tiny)
    flushed &= np.signbit(want.astype(np.float64)) == np.signbit(got.astype(np.float64))
    flushed &= want.astype(np.float64) != got.astype(np.float64)
    both = ~want_nan & ~got_nan & ~flushed
    distance = np.abs(ordered(want, int_type) - ordered(got, int_type))
    distance = np.where(both, distance, 0)
    worst = int(np.argmax(distance)) if distance.size else 0
    wide_want, wide_got = want.astype(np.float64), got.astype(np.float64)
    special = both & (np.isinf(wide_want) | np.isinf(wide_got) | (wide_want == 0)
                      | (wide_got == 0))
    sign_or_inf = special & ((np.signbit(wide_want) != np.signbit(wide_got))
                             | (np.isinf(wide_want) != np.isinf(wide_got))
                             | ((wide_want == 0) != (wide_got == 0)))
    return {"max_ulps": int(distance.max()) if distance.size else 0, "worst_index": worst,
            "flushes": int(flushed.sum()),
            "nan_mismatches": int((want_nan != got_nan).sum()),
            "special_mismatches": int(sign_or_inf.sum())}


def inputs(dtype_name: str, start: int, stop: int, stride: int) -> np.ndarray:
    dtype, uint, _ = DTYPES[dtype_name]
    return np.arange(start, stop, stride, dtype=np.uint64).astype(uint).view(dtype)


def measure(name: str, dtype_name: str, stride: int = 1, chunk: int = 1 << 24) -> dict:
    jax_fn, tf_fn = FUNCTIONS[name]
    dtype, _, int_type = DTYPES[dtype_name]
    jitted = jax.jit(jax_fn)
    total = 1 << (8 * np.dtype(dtype).itemsize)
    result = {"function": name, "dtype": dtype_name, "stride": stride, "inputs": 0,
              "max_ulps": 0, "worst_input": None, "flushes": 0, "nan_mismatches": 0,
              "special_mismatches": 0}
    try:
        tf_fn(tf.zeros([1], tf.as_dtype(dtype)))
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, TypeError):
        result["unsupported"] = True
        return result
    start_time = time.time()
    for start in range(0, total, chunk * stride):
        x = inputs(dtype_name, start, min(total, start + chunk * stride), stride)
        want = np.asarray(jitted(x))
        got = tf_fn(tf.constant(x)).numpy()
        c = compare(want, got, int_type)
        result["inputs"] += x.size
        result["flushes"] += c["flushes"]
        result["nan_mismatches"] += c["nan_mismatches"]
        result["special_mismatches"] += c["special_mismatches"]
        if c["max_ulps"] > result["max_ulps"]:
            i = c["worst_index"]
            result.update(max_ulps=c["max_ulps"], worst_input=float(x[i]),
                          worst_jax=float(want[i]), worst_tf=float(got[i]))
        print(f"  {name} {dtype_name}: {result['inputs']:,} inputs, max {result['max_ulps']} "
              f"ulps ({time.time() - start_time:.0f} s)", file=sys.stderr, flush=True)
    return result


def report(rows: list[dict]) -> str:
    lines = ["# TF kernels against JAX on every input", "",
             "Written by `python -m tools.kernel_bounds --write` (see its docstring). "
             "`stride` 1: every value of the type; k: every k-th bit pattern.", "",
             "| function | dtype | inputs | stride | max ulps | at x | JAX | TF | subnormal "
             "flushes | NaN mismatches | sign/inf/zero mismatches |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("unsupported"):
            lines.append(f"| {r['function']} | {r['dtype']} | no TF kernel for this dtype |"
                         " | | | | | | | |")
            continue
        lines.append(f"| {r['function']} | {r['dtype']} | {r['inputs']:,} | {r['stride']} | "
                     f"{r['max_ulps']} | {r.get('worst_input')} | {r.get('worst_jax')} | "
                     f"{r.get('worst_tf')} | {r['flushes']} | {r['nan_mismatches']} | "
                     f"{r['special_mismatches']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--dtypes", default="float16,bfloat16,float32")
    parser.add_argument("--stride", type=int, default=1,
                        help="float32: every k-th bit pattern (1: all 2**32)")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for name in args.functions.split(","):
        for dtype_name in args.dtypes.split(","):
            stride = args.stride if dtype_name == "float32" else 1
            rows.append(measure(name, dtype_name, stride))
    text = report(rows)
    print(text)
    if args.write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "kernel_bounds.md").write_text(text)
        (RESULTS / "kernel_bounds.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
