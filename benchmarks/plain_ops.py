"""Plain TF ops (`enable_xla=False`, issue 27) vs one `XlaCallModule` op: inference and
conversion time, side by side in one process.

Per workload (MLP, the example CNN, the transformer block; batch 1 and 256), four candidates
timed interleaved with the order changing every round (`harness.interleaved`), blocks of calls
per round (`calibrate`), one untimed call before each block:

- `jax.jit` (for scale);
- `xla tf.function`: `tf.function(convert(f))`, the `XlaCallModule` op run by TF's XLA;
- `xla jit_compile`: the same inside `tf.function(jit_compile=True)`;
- `plain tf.function`: the exported module lowered to ordinary TF ops (`tf_ops.plain`) in a
  `tf.function` (no XLA anywhere): through `convert(f, enable_xla=False)` when the converter
  has it, else built directly from the exported module with `tf_ops.plain.run_program` (what
  the converter does); the report says which.

Parameters are `tf.Variable`s, the input a `tf.Tensor`, the result copied to numpy. Every
candidate's output is checked against `jax.jit` first. Conversion: seconds from a fresh
function (a unique constant added, so no cache hits) to its first result at batch 1.

Run: `nice -n 10 python -m benchmarks.plain_ops [--rounds N] [--write]` (writes
`benchmarks/results/plain_ops.md` / `.json`).
"""
from __future__ import annotations

import argparse
import itertools
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import calibrate, forward, harness, rows  # noqa: E402
from jax2tf_native import exporting  # noqa: E402
from tf_ops import plain  # noqa: E402

WORKLOADS = (("mlp", 1), ("mlp", 256), ("cnn", 1), ("cnn", 256),
             ("transformer", 1), ("transformer", 256))
XLA_PREFIXES = ("Xla", "_Xla")


def graph_op_types(concrete) -> set[str]:
    graph_def = concrete.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def converter_has_plain() -> bool:
    """Whether `convert(..., enable_xla=False)` writes plain TF ops (not ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn = tf.function(jax2tf_native.convert(jax.numpy.sin, enable_xla=False),
                             autograph=False)
            concrete = fn.get_concrete_function(tf.TensorSpec((2,), tf.float32))
        except Exception:
            return False
    return not any(t.startswith(XLA_PREFIXES) or t == "XlaCallModule"
                   for t in graph_op_types(concrete))


def plain_converted(apply_fn, params, x, use_converter: bool):
    """(f(variables, x) building plain TF ops, how it was built). Raises PlainLoweringError."""
    if use_converter:
        return jax2tf_native.convert(apply_fn, enable_xla=False), "convert(enable_xla=False)"
    specs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                         (params, x))
    exported = exporting.export(apply_fn, specs, {}, platforms=("cpu",), disabled_checks=(),
                                linalg="portable")
    program = plain.read_program(exported.mlir_module())
    plain.check_program(program)
    kept = sorted(exported.module_kept_var_idx)

    def run(variables, x_tf):
        flat = [tf.convert_to_tensor(v) for v in jax.tree.leaves((variables, x_tf))]
        (out,) = plain.run_program(program, [flat[i] for i in kept])
        return out
    return run, "tf_ops.plain.run_program on the exported module"


def candidates_for(model: str, batch: int, use_converter: bool) -> tuple[dict, dict]:
    """({label: zero-argument callable}, notes)."""
    (apply_fn, params, x, jitted, params_jax, x_jax, want, variables,
     x_tf) = forward.workload(model, batch)
    converted = jax2tf_native.convert(apply_fn)
    fns = {"xla tf.function": tf.function(lambda xs: converted(variables, xs), autograph=False),
           "xla jit_compile": tf.function(lambda xs: converted(variables, xs), autograph=False,
                                          jit_compile=True)}
    notes = {}
    try:
        plain_fn, how = plain_converted(apply_fn, params, x, use_converter)
        graph_fn = tf.function(lambda xs: plain_fn(variables, xs), autograph=False)
        ops = graph_op_types(graph_fn.get_concrete_function(x_tf))
        xla = sorted(t for t in ops if t.startswith(XLA_PREFIXES))
        assert not xla, f"{model}: XLA ops in the plain graph: {xla}"
        fns["plain tf.function"] = graph_fn
        notes["plain built by"] = how
        notes["plain graph op types"] = sorted(ops)
    except plain.PlainLoweringError as exc:
        notes["plain refused"] = str(exc).splitlines()[0][:300]
    for label, fn in fns.items():
        np.testing.assert_allclose(fn(x_tf).numpy(), want, rtol=2e-4, atol=2e-4,
                                   err_msg=f"{model} b{batch}: {label} differs from jax.jit")
    candidates = {"jax.jit": lambda: jitted(params_jax, x_jax).block_until_ready()}
    for label, fn in fns.items():
        candidates[label] = (lambda f: lambda: f(x_tf).numpy())(fn)
    return candidates, notes


def conversion_candidates(model: str, use_converter: bool) -> dict:
    """{label: callable converting a fresh function (unique constant) to its first result}."""
    make_params, apply_fn, make_input = forward.MODELS[model]
    params = make_params()
    x = make_input(1)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x_tf = tf.constant(x)
    counter = itertools.count(1)

    def fresh():
        offset = np.float32(next(counter))
        return lambda p, xs: apply_fn(p, xs) + offset

    def xla(jit_compile):
        converted = jax2tf_native.convert(fresh())
        return tf.function(lambda xs: converted(variables, xs), autograph=False,
                           jit_compile=jit_compile)(x_tf).numpy()

    def plain_first():
        fn, _ = plain_converted(fresh(), params, x, use_converter)
        return tf.function(lambda xs: fn(variables, xs), autograph=False)(x_tf).numpy()

    return {"xla tf.function": lambda: xla(False), "xla jit_compile": lambda: xla(True),
            "plain tf.function": plain_first}


def _ms(stats: dict) -> str:
    return (f"{stats['median'] * 1e3:.3f} ({stats['p10'] * 1e3:.3f}–{stats['p90'] * 1e3:.3f})"
            if stats else "–")


def _ratio_cell(a: dict | None, b: dict | None) -> str:
    if not a or not b:
        return "–"
    pair = rows.paired(a, b)
    text = f"{a['median'] / b['median']:.2f}"
    if pair:
        text += f" (per round {pair['median']:.2f}, {pair['p10']:.2f}–{pair['p90']:.2f})"
    return text


def run(rounds: int, conversion_rounds: int, workloads=WORKLOADS) -> dict:
    use_converter = converter_has_plain()
    results = {"use_converter": use_converter, "inference": [], "conversion": []}
    for model, batch in workloads:
        candidates, notes = candidates_for(model, batch, use_converter)
        calls = calibrate.calls_per_round(candidates)
        stats = {k: rows.from_harness(v) for k, v in harness.interleaved(
            candidates, rounds=rounds, calls_per_round=calls, settle=1).items()}
        results["inference"].append({"workload": f"{model} b{batch}", "calls_per_round": calls,
                                     "stats": stats, "notes": notes})
        print(f"{model} b{batch}: " + ", ".join(f"{k} {v['median'] * 1e3:.3f} ms"
                                               for k, v in stats.items()), flush=True)
    for model in dict(workloads):
        candidates = conversion_candidates(model, use_converter)
        try:
            candidates["plain tf.function"]()
        except plain.PlainLoweringError:
            del candidates["plain tf.function"]
        stats = {k: rows.from_harness(v) for k, v in harness.interleaved(
            candidates, rounds=conversion_rounds, warmup=1).items()}
        results["conversion"].append({"workload": f"{model} b1", "stats": stats})
        print(f"{model} conversion: " + ", ".join(f"{k} {v['median']:.3f} s"
                                                  for k, v in stats.items()), flush=True)
    return results


def markdown(results: dict, command: str, load: dict) -> str:
    how = ("`convert(f, enable_xla=False)`" if results["use_converter"] else
           "`tf_ops.plain.run_program` on the exported module inside a `tf.function` (what "
           "`convert(enable_xla=False)` does; the converter did not have it yet)")
    lines = [
        "# Plain TF ops vs XlaCallModule", "",
        f"`{command}`. {harness.machine_sentence(load)} Medians in ms per call, (p10–p90) over "
        "the rounds; ratios of medians, and the median (p10–p90) of the per-round ratios "
        "(candidates timed interleaved, the order changing every round). Plain graph built by "
        f"{how}. Each candidate's output was checked against `jax.jit` before timing.", "",
        "## Inference", "",
        "| workload | jax.jit | xla tf.function | xla jit_compile | plain tf.function | "
        "plain / xla tf.function | plain / xla jit_compile |",
        "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results["inference"]:
        s = r["stats"]
        p = s.get("plain tf.function")
        lines.append(
            f"| {r['workload']} | {_ms(s['jax.jit'])} | {_ms(s['xla tf.function'])} | "
            f"{_ms(s['xla jit_compile'])} | "
            + (_ms(p) if p else "refused") + " | "
            f"{_ratio_cell(p, s['xla tf.function'])} | {_ratio_cell(p, s['xla jit_compile'])} |")
    refused = [(r["workload"], r["notes"]["plain refused"]) for r in results["inference"]
               if "plain refused" in r["notes"]]
    if refused:
        lines += [""] + [f"- {w}: plain refused: {why}" for w, why in refused]
    lines += ["", "## Conversion (fresh function to first result, batch 1; seconds)", "",
              "| model | xla tf.function | xla jit_compile | plain tf.function | "
              "plain / xla tf.function | plain / xla jit_compile |",
              "|---|---:|---:|---:|---:|---:|"]
    sec = lambda st: (f"{st['median']:.3f} ({st['p10']:.3f}–{st['p90']:.3f})" if st else
                      "refused")
    for r in results["conversion"]:
        s = r["stats"]
        p = s.get("plain tf.function")
        lines.append(f"| {r['workload']} | {sec(s['xla tf.function'])} | "
                     f"{sec(s['xla jit_compile'])} | {sec(p)} | "
                     f"{_ratio_cell(p, s['xla tf.function'])} | "
                     f"{_ratio_cell(p, s['xla jit_compile'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--conversion-rounds", type=int, default=4)
    parser.add_argument("--only", default=None, help="comma-separated models, e.g. mlp,cnn")
    parser.add_argument("--write", action="store_true",
                        help="write benchmarks/results/plain_ops.md and .json")
    args = parser.parse_args()
    workloads = WORKLOADS if not args.only else tuple(
        w for w in WORKLOADS if w[0] in args.only.split(","))
    recorded = harness.LoadRecord()
    results = run(args.rounds, args.conversion_rounds, workloads)
    load = recorded.finish()
    command = (f"python -m benchmarks.plain_ops --rounds {args.rounds} --conversion-rounds "
               f"{args.conversion_rounds}" + (f" --only {args.only}" if args.only else ""))
    text = markdown(results, command, load)
    text += f"\n({recorded.minutes:.1f} min.)\n"
    print(text)
    if args.write:
        harness.write_results("plain_ops", {"environment": harness.environment(),
                                            "load_average": load, "results": results}, text)


if __name__ == "__main__":
    main()
