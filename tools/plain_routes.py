"""Issue 27's two routes to plain TF ops, measured side by side on JAX's primitive harnesses.

Route 1, TF's own legalization: the exported StableHLO module through TF 2.21's
`stablehlo-legalize-to-hlo,tf-legalize-hlo` passes (reached through the private
`tensorflow.python.pywrap_mlir.experimental_run_pass_pipeline`: used here, in a measuring tool,
never in product code). What comes out holds `tf.*` ops (still to be turned into graph ops),
plus whatever the passes could not legalize (`mhlo.*` / `stablehlo.*` / `chlo.*`), which
someone would have to lower by hand.

Route 2, ours: `tf_ops.plain.read_program` + `check_program` (refuses with our error) + tracing
`run_program` into a `tf.function` graph.

For every N-th harness case (sorted by name, the soak's order) this records, per route, the
outcome and the time per module; then runs a few semantic traps (integer division by zero,
shifts past the width, NaN in max/min/argmax/sort, float->int saturation, unsigned division,
round half away from zero) through both routes: route 1's TF op is named from its output and
run by hand with `tf.raw_ops`, route 2 runs our lowering; both are compared with `jax.jit`.

Usage:
    nice -n 10 python tools/plain_routes.py --every 20 --out tools/results/plain_routes
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PIPELINE = "stablehlo-legalize-to-hlo,tf-legalize-hlo"
# Dialects whose ops are already graph-ready after route 1 (tf ops by name, constants, calls).
_GRAPH_READY = ("tf.", "arith.constant", "func.")
_OP_RE = re.compile(r'^(?:%[\w#:, %]+ = )?"?([a-z_]+\.[A-Za-z_][\w.]*)"?[\s(<{]')


def legalize(module_text: str) -> str:
    # Private TF entry point (see the module docstring): a measuring tool only.
    from tensorflow.python import pywrap_mlir
    return pywrap_mlir.experimental_run_pass_pipeline(module_text, PIPELINE, False)


def op_names(module_text: str) -> collections.Counter:
    """Counts of dialect op names in a printed MLIR module (pretty or generic form)."""
    names = collections.Counter()
    for line in module_text.splitlines():
        line = line.strip()
        if line.startswith(("module", "func.func", "}", "^bb", "#", "//")):
            continue
        found = _OP_RE.match(line)
        if found:
            names[found.group(1)] += 1
        elif line.startswith("return ") or line == "return":
            names["func.return"] += 1
        elif " = call @" in line or line.startswith("call @"):
            names["func.call"] += 1
    return names


def route1(module_text: str) -> dict:
    start = time.perf_counter()
    try:
        out = legalize(module_text)
    except Exception as exc:  # the pass pipeline rejects the module
        return {"r1": "pass_error", "r1_seconds": round(time.perf_counter() - start, 4),
                "r1_detail": str(exc).strip().splitlines()[0][:300] if str(exc) else
                type(exc).__name__}
    seconds = time.perf_counter() - start
    import tensorflow as tf
    names = op_names(out)
    left = {n: c for n, c in names.items()
            if not n.startswith(_GRAPH_READY) and n not in ("mhlo.return", "stablehlo.return")}
    xla = {n: c for n, c in names.items() if n.startswith(("tf.Xla", "tf._Xla"))}
    # A tf.* op with no raw op of that name cannot be rebuilt as a graph op by name.
    no_raw = {n: c for n, c in names.items()
              if n.startswith("tf.") and not hasattr(tf.raw_ops, n[3:])}
    if left:
        status = "left"
    elif xla or no_raw:
        status = "xla_or_unbuildable"
    else:
        status = "all_tf"
    return {"r1": status, "r1_seconds": round(seconds, 4), "r1_left": left, "r1_xla": xla,
            "r1_no_raw": no_raw, "r1_tf_ops": sorted(n for n in names if n.startswith("tf."))}


def route2(exported) -> dict:
    import tensorflow as tf
    from tf_ops import plain
    start = time.perf_counter()
    try:
        program = plain.read_program(exported.mlir_module())
        plain.check_program(program)
    except plain.PlainLoweringError as exc:
        found = re.search(r"cannot lower `([^`]+)`", str(exc))
        return {"r2": "refused", "r2_seconds": round(time.perf_counter() - start, 4),
                "r2_op": found.group(1) if found else str(exc).splitlines()[0][:200]}
    checked = time.perf_counter() - start
    try:
        kept = sorted(exported.module_kept_var_idx)
        specs = [tf.TensorSpec(exported.in_avals[i].shape, exported.in_avals[i].dtype)
                 for i in kept]
        tf.function(lambda *xs: plain.run_program(program, list(xs)), autograph=False,
                    input_signature=specs).get_concrete_function()
    except plain.PlainLoweringError as exc:
        return {"r2": "refused_at_trace", "r2_seconds": round(time.perf_counter() - start, 4),
                "r2_op": str(exc).splitlines()[0][:200]}
    except Exception as exc:
        return {"r2": "trace_error", "r2_seconds": round(time.perf_counter() - start, 4),
                "r2_op": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"r2": "ok", "r2_seconds": round(time.perf_counter() - start, 4),
            "r2_check_seconds": round(checked, 4)}


def sample(every: int, limit: int | None) -> list[dict]:
    import jax
    import numpy as np
    from jax._src.internal_test_util import test_harnesses  # private: tools only (soak's)
    from jax2tf_native import exporting
    harnesses = sorted(test_harnesses.all_harnesses, key=lambda h: h.fullname)
    indices = list(range(0, len(harnesses), every))[:limit]
    records = []
    for n, index in enumerate(indices):
        h = harnesses[index]
        rec = {"index": index, "name": h.fullname[:200], "group": h.group_name}
        try:
            rec["dtype"] = np.dtype(h.dtype).name
        except TypeError:
            rec["dtype"] = str(h.dtype)
        if not h.filter("cpu"):
            continue
        try:
            args = h.dyn_args_maker(np.random.RandomState(0))
            jax.jit(h.dyn_fun)(*args)
            exported = exporting.export(h.dyn_fun, tuple(args), {}, platforms=("cpu",),
                                        disabled_checks=(), linalg="portable")
        except Exception:
            continue  # JAX itself (or the portable export) does not run it: not a route matter
        rec.update(route1(exported.mlir_module()))
        rec.update(route2(exported))
        records.append(rec)
        if (n + 1) % 25 == 0:
            print(f"[{n + 1}/{len(indices)}]", flush=True)
    return records


# ----------------------------------------------------------------------------- semantic traps

def _traps():
    import jax.numpy as jnp
    import numpy as np
    import tensorflow as tf
    from jax import lax
    i32 = np.array([7, -7, 5, np.iinfo(np.int32).min], np.int32)
    div = np.array([0, 0, -2, -1], np.int32)
    f32 = np.array([np.nan, 1.0, 3e10, -np.inf], np.float32)
    ones = np.ones(4, np.float32)
    u32 = np.array([7, 2**31, 5, 0], np.uint32)
    shift = np.array([1, 31, 32, 40], np.int32)
    raw = tf.raw_ops
    # (name, JAX function, args, TF op route 1 is expected to write, that op run by hand)
    return [
        ("integer division by zero, INT_MIN / -1", lax.div, (i32, div), "tf.Div",
         lambda x, y: raw.Div(x=x, y=y)),
        ("integer remainder by zero, of negatives", lax.rem, (i32, div), "tf.Mod",
         lambda x, y: raw.Mod(x=x, y=y)),
        ("unsigned division by zero", lax.div, (u32, np.array([0, 3, 2, 0], np.uint32)),
         "tf.Div", lambda x, y: raw.Div(x=x, y=y)),
        ("shift_left by 1, 31, 32, 40", lax.shift_left, (i32, shift), "tf.LeftShift",
         lambda x, y: raw.LeftShift(x=x, y=y)),
        ("shift_right_logical of negatives (int32)", lax.shift_right_logical, (i32, shift),
         "tf.RightShift", lambda x, y: raw.RightShift(x=x, y=y)),
        ("shift_right_arithmetic by 32, 40", lax.shift_right_arithmetic, (i32, shift),
         "tf.RightShift", lambda x, y: raw.RightShift(x=x, y=y)),
        ("max with NaN", lax.max, (f32, ones), "tf.Maximum",
         lambda x, y: raw.Maximum(x=x, y=y)),
        ("min with NaN", lax.min, (f32, ones), "tf.Minimum",
         lambda x, y: raw.Minimum(x=x, y=y)),
        ("reduce max with NaN", jnp.max, (f32,), "tf.Max",
         lambda x: raw.Max(input=x, axis=[0])),
        ("argmax with NaN", jnp.argmax, (f32,), "tf.ArgMax",
         lambda x: raw.ArgMax(input=x, dimension=0, output_type=tf.int32)),
        ("float32 -> int32 of NaN, 3e10, -inf", lambda x: x.astype(jnp.int32), (f32,),
         "tf.Cast", lambda x: raw.Cast(x=x, DstT=tf.int32)),
        ("float32 -> uint8 of NaN, 3e10, -inf", lambda x: x.astype(jnp.uint8), (f32,),
         "tf.Cast", lambda x: raw.Cast(x=x, DstT=tf.uint8)),
        ("round half away from zero", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
         (np.array([0.5, 1.5, -2.5, 2.4], np.float32),), None, None),
        ("round half to even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
         (np.array([0.5, 1.5, -2.5, 2.4], np.float32),), "tf.Round",
         lambda x: raw.Round(x=x)),
        ("sort with NaN and -0.0", jnp.sort,
         (np.array([np.nan, 1.0, -0.0, 0.0, -np.inf, -1.0], np.float32),), None, None),
        ("int8 matmul", jnp.matmul, (np.full((4, 4), 3, np.int8), np.full((4, 4), 5, np.int8)),
         None, None),
    ]


def _values(out) -> list:
    import numpy as np
    return [np.asarray(o.numpy() if hasattr(o, "numpy") else o).tolist()
            for o in (out if isinstance(out, (list, tuple)) else [out])]


def traps() -> list[dict]:
    import jax
    import numpy as np
    import tensorflow as tf
    from tf_ops import plain
    rows = []
    for name, fun, args, tf_op, by_hand in _traps():
        exported = jax.export.export(jax.jit(fun), platforms=["cpu"])(*args)
        text = exported.mlir_module()
        want = _values(jax.jit(fun)(*args))
        row = {"trap": name, "jax": want}
        try:
            names = op_names(legalize(text))
            row["r1_ops"] = sorted(n for n in names if n.startswith(("tf.", "mhlo.",
                                                                      "stablehlo.", "chlo.")))
        except Exception as exc:
            row["r1_ops"] = []
            row["r1"] = "pass error: " + str(exc).strip().splitlines()[0][:160]
        if "r1" not in row:
            left = [n for n in row["r1_ops"] if not n.startswith("tf.")
                    and n not in ("mhlo.return", "stablehlo.return")]
            if left:
                row["r1"] = "left for us: " + ", ".join(left)
            elif tf_op not in row["r1_ops"]:
                row["r1"] = f"(expected {tf_op}, got {row['r1_ops']})"
            else:
                try:
                    got = _values(by_hand(*[tf.constant(a) for a in args]))
                    row["r1_value"] = got
                    row["r1"] = "equal" if _same(want, got) else "WRONG VALUE"
                except Exception as exc:
                    message = re.sub(r"\{\{[^}]*\}\}\s*", "", str(exc)).strip()
                    message = re.sub(r"\s*name:\s*$", "", message.splitlines()[0]
                                     if message else "")
                    row["r1"] = ("TF error: " + message[:120] if message
                                 else type(exc).__name__)
        try:
            program = plain.read_program(text)
            plain.check_program(program)
            kept = sorted(exported.module_kept_var_idx)
            got = _values(plain.run_program(program, [tf.constant(args[i]) for i in kept]))
            row["r2_value"] = got
            row["r2"] = "equal" if _same(want, got) else "WRONG VALUE"
        except plain.PlainLoweringError as exc:
            found = re.search(r"cannot lower `([^`]+)`.*?: (.*?)\. Fix:", str(exc))
            row["r2"] = ("refused: " + (f"{found.group(1)}: {found.group(2)}" if found
                                        else str(exc)[:120]))
        except Exception as exc:
            row["r2"] = f"error: {type(exc).__name__}: {str(exc)[:120]}"
        rows.append(row)
    return rows


def _same(want, got) -> bool:
    import numpy as np
    if len(want) != len(got):
        return False
    return all(np.array_equal(np.asarray(w), np.asarray(g), equal_nan=np.asarray(w).dtype.kind
                              == "f") for w, g in zip(want, got))


# ----------------------------------------------------------------------------- report

def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def write_report(records: list[dict], trap_rows: list[dict], path: str, every: int,
                 total: int) -> None:
    r1 = collections.Counter(r["r1"] for r in records)
    r2 = collections.Counter(r["r2"] for r in records)
    both = collections.Counter((r["r1"], r["r2"]) for r in records)
    left = collections.Counter()
    left_cases = collections.Counter()
    for r in records:
        for n, c in r.get("r1_left", {}).items():
            left[n] += c
            left_cases[n] += 1
    xla = collections.Counter(n for r in records for n in r.get("r1_xla", {}))
    no_raw = collections.Counter(n for r in records for n in r.get("r1_no_raw", {}))
    refused = collections.Counter(r.get("r2_op", "") for r in records
                                  if r["r2"] != "ok")
    f32 = [r for r in records if r.get("dtype") == "float32"]
    t1 = [r["r1_seconds"] for r in records if "r1_seconds" in r]
    t2 = [r["r2_seconds"] for r in records if r["r2"] == "ok"]
    t1_ok = [r["r1_seconds"] for r in records if r["r1"] == "all_tf"]
    t2_check = [r["r2_check_seconds"] for r in records if r["r2"] == "ok"]
    lines = [
        "# Routes to plain TF ops, measured", "",
        f"Generated by `tools/plain_routes.py --every {every}`: every {every}th of the {total} "
        f"harness cases (sorted by name), {len(records)} that JAX runs and exports here.",
        "Route 1: TF's `stablehlo-legalize-to-hlo,tf-legalize-hlo` passes on the exported module. "
        "Route 2: ours",
        "(`tf_ops.plain` read + check + trace into a `tf.function` graph). Raw records: "
        "`plain_routes.jsonl`.", "",
        "## Coverage on the sample", "",
        "| route | outcome | cases | float32 cases |", "|---|---|---:|---:|"]
    for k, c in sorted(r1.items()):
        lines.append(f"| 1 (TF passes) | {k} | {c} | "
                     f"{sum(r['r1'] == k for r in f32)} of {len(f32)} |")
    for k, c in sorted(r2.items()):
        lines.append(f"| 2 (ours) | {k} | {c} | "
                     f"{sum(r['r2'] == k for r in f32)} of {len(f32)} |")
    lines += ["", "`all_tf`: only `tf.*` ops (and constants, calls) left, each with a raw op of "
              "its name; `left`: `mhlo`/`stablehlo`/`chlo` ops the passes did not legalize "
              "(ours to lower by hand); `xla_or_unbuildable`: `tf.Xla*` ops or a `tf.*` op "
              "without a raw op; `pass_error`: the pipeline rejects the module.", "",
              "| route 1 \\ route 2 | " + " | ".join(sorted(r2)) + " |",
              "|---|" + "---:|" * len(r2)]
    for k1 in sorted(r1):
        lines.append(f"| {k1} | " + " | ".join(str(both.get((k1, k2), 0)) for k2 in sorted(r2))
                     + " |")
    lines += ["", "### What route 1 leaves (op: occurrences, cases)", "",
              "(ops inside a left op's body, e.g. a scatter's `mhlo.add`, are counted too)", "",
              ", ".join(f"`{n}` {c} ({left_cases[n]})" for n, c in left.most_common()) or "none"]
    if xla:
        lines += ["", "XLA ops written by route 1: " + ", ".join(f"`{n}` ({c} cases)"
                                                             for n, c in xla.most_common())]
    if no_raw:
        lines += ["", "`tf.*` ops with no raw op of that name: "
                  + ", ".join(f"`{n}` ({c} cases)" for n, c in no_raw.most_common())]
    errors = collections.Counter(r.get("r1_detail", "")[:140] for r in records
                                 if r["r1"] == "pass_error")
    if errors:
        lines += ["", "Route 1 pass errors: " + "; ".join(f"{c}x {e}" for e, c in
                                                         errors.most_common(6))]
    lines += ["", "### What route 2 refuses now (op: cases)", "",
              ", ".join(f"`{n}` {c}" for n, c in refused.most_common()) or "none", "",
              "## Time per module (this 2-core shared machine; medians)", "",
              f"- route 1, the pass pipeline alone (text in, text out): "
              f"{1e3 * _median(t1):.1f} ms (all {len(t1)} modules), "
              f"{1e3 * _median(t1_ok):.1f} ms on the all-tf ones; building graph ops from its "
              f"text is not included",
              f"- route 2, read + check + trace to a graph: {1e3 * _median(t2):.1f} ms "
              f"(the {len(t2)} modules it lowers), of which read + check (the part comparable "
              f"to route 1's passes; the rest builds the TF graph, which route 1 would need "
              f"too): {1e3 * _median(t2_check):.1f} ms", "",
              "Route 2's `ok` here means checked and traced; whether its values equal JAX's is "
              "the soak's (`tools/results/plain_coverage.md`).", "",
              "## Semantic traps", "",
              "Route 1's TF op (named in its output) run by hand with `tf.raw_ops` on the trap's "
              "inputs; route 2 our lowering; both against `jax.jit`.", "",
              "| trap | JAX | route 1 ops | route 1 | route 2 |", "|---|---|---|---|---|"]
    for t in trap_rows:
        r1v = t["r1"] + (f" {t['r1_value']}" if t["r1"] == "WRONG VALUE" else "")
        r2v = t["r2"] + (f" {t['r2_value']}" if t["r2"] == "WRONG VALUE" else "")
        ops = ", ".join(o for o in t["r1_ops"] if o not in ("mhlo.return", "tf.Const"))
        lines.append(f"| {t['trap']} | {t['jax']} | {ops[:90]} | {r1v[:160]} | {r2v[:160]} |"
                     .replace("\n", " "))
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(_REPO, "tools", "results",
                                                      "plain_routes"))
    parser.add_argument("--traps-only", action="store_true")
    args = parser.parse_args(argv)
    from jax._src.internal_test_util import test_harnesses
    total = len(test_harnesses.all_harnesses)
    trap_rows = traps()
    for t in trap_rows:
        print(f"{t['trap']}: route 1 {t['r1']}; route 2 {t['r2']}", flush=True)
    records = [] if args.traps_only else sample(args.every, args.limit)
    with open(args.out + ".jsonl", "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in records + trap_rows)
    write_report(records, trap_rows, args.out + ".md", args.every, total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
