"""Plain graphs (`convert(f, enable_xla=False)`) vs the same models hand-written in Keras with
the same weights: op counts and latency in TF, TFLite and TF.js.

Per model of benchmarks/handwritten_pairs.py (MLP with exact GELU, CNN, pre-LN transformer
block, ResNet block with batch norm), side by side in one process:

1. `ops`: compute ops of each `tf.function`'s graph and function library (per op type too).
2. `tf`: `tf.function` latency at batch 1 and 32, ours, Keras and `jax.jit` (for scale) timed
   interleaved (`harness.interleaved`: blocks of calls sized by `calibrate`, one untimed call
   before each block, the order changing every round).
3. `tflite`: ours through `saved_model_tools.save(enable_xla=False, with_gradient=False)` +
   `tflite.convert_to_tflite`, Keras through `model.export` + `TFLiteConverter` (defaults);
   operators of the flatbuffer; `interpreter.invoke()` at batch 1, interleaved.
4. `tfjs`: ours through `saved_model_tools.tfjs.convert_to_tfjs`, Keras through tensorflowjs's
   converter; model.json nodes; ms per call in Node at batch 1 and 8, both models in one Node
   process, the order reversed every other round (benchmarks/tfjs_interleaved.js).

Every candidate's output is checked against `jax.jit` first (ours in TF within 1e-5, Keras
within the pair's tolerance, TFLite and TF.js within rtol 1e-4 / atol 1e-5).

    nice -n 5 python -m benchmarks.plain_vs_handwritten [--rounds N] [--models mlp,cnn]
        [--only ops,tf,tflite,tfjs] [--quick] [--write]
    python -m benchmarks.plain_vs_handwritten --render   # redraw .md/.png from the .json

Writes (with --write) benchmarks/results/plain_vs_handwritten.{md,json,png}. Progress goes to
stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import calibrate, harness, rows  # noqa: E402
from benchmarks import handwritten_graphs as graphs  # noqa: E402
from benchmarks import handwritten_report as report  # noqa: E402
from benchmarks import handwritten_tfjs as tfjs  # noqa: E402
from benchmarks.handwritten_pairs import PAIRS  # noqa: E402

NAME = "plain_vs_handwritten"
PARTS = ("ops", "tf", "tflite", "tfjs")
TF_BATCHES, TFLITE_BATCHES, TFJS_BATCHES = (1, 32), (1,), (1, 8)
# Runtimes with their own kernels (TFLite, TF.js in JS) against jax.jit.
RUNTIME_RTOL, RUNTIME_ATOL = 1e-4, 1e-5


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _timed(candidates: dict, rounds: int, target_s: float) -> dict:
    calls = calibrate.calls_per_round(candidates, target_s=target_s)
    stats = harness.interleaved(candidates, rounds=rounds, calls_per_round=calls, settle=1)
    return {"calls_per_round": calls,
            "stats": {k: rows.from_harness(v) for k, v in stats.items()}}


def _ratio_text(timing: dict) -> str:
    pair = rows.paired(timing["stats"].get("ours"), timing["stats"].get("keras"))
    return f"ours/keras {pair['median']:.2f}" if pair else ""


def _counter(counts) -> dict | None:
    return dict(sorted(counts.items())) if counts is not None else None


def measure_tf(sides: graphs.TfSides, rounds: int, target_s: float) -> dict:
    out = {}
    for batch in TF_BATCHES:
        x = sides.pair.inputs(batch)
        x_tf = tf.constant(x)
        out[str(batch)] = timing = _timed({
            "jax.jit": lambda x=x: sides.jitted(x).block_until_ready(),
            "ours": lambda x_tf=x_tf: sides.ours(x_tf).numpy(),
            "keras": lambda x_tf=x_tf: sides.keras(x_tf).numpy()}, rounds, target_s)
        progress(f"  tf.function b{batch}: {_ratio_text(timing)}")
    return {"time": out}


def measure_tflite(sides: graphs.TfSides, saved: tuple[Path, Path], tmp: Path, rounds: int,
                   target_s: float, diffs: dict) -> dict:
    built = graphs.tflite_models(*saved, tmp)
    part = {"counts": {side: _counter(graphs.tflite_ops(built[side]))
                       if built[side] else None for side in ("ours", "keras")},
            "errors": built["errors"], "time": {}}
    for side, error in built["errors"].items():
        progress(f"  TFLite {side} did not convert: {error.splitlines()[0][:200]}")
    present = [side for side in ("ours", "keras") if built[side]]
    for batch in (1, 3):   # the check, at two batch sizes (the batch stays dynamic)
        x = sides.pair.inputs(batch, seed=batch)
        want = np.asarray(sides.jitted(x))
        for side in present:
            got = graphs.TfliteRunner(built[side], x).output()
            np.testing.assert_allclose(got, want, rtol=RUNTIME_RTOL, atol=RUNTIME_ATOL,
                                       err_msg=f"{sides.pair.name} b{batch}: TFLite {side}")
            diffs[f"tflite {side}"] = max(diffs.get(f"tflite {side}", 0.0),
                                          float(np.max(np.abs(got - want))))
    for batch in TFLITE_BATCHES:
        x = sides.pair.inputs(batch)
        runners = {side: graphs.TfliteRunner(built[side], x).invoke for side in present}
        part["time"][str(batch)] = timing = _timed(runners, rounds, target_s)
        progress(f"  TFLite invoke b{batch}: {_ratio_text(timing)}")
    return part


def measure_tfjs(models: list[dict], saved: dict, tmp: Path, rounds: int,
                 batches: tuple[int, ...], compare_converters: bool) -> str | None:
    """Fills each model's "tfjs" part; returns the TF.js version timed (None: not timed).
    `compare_converters`: also count what tensorflowjs's converter makes of our SavedModel."""
    jobs, ours_dirs = [], {}
    for name, (ours_saved, keras_saved) in saved.items():
        jobs.append((keras_saved, tmp / f"{name}_keras_js", "defaults"))
        if compare_converters:
            jobs.append((ours_saved, tmp / f"{name}_ours_tensorflowjs", "lenient"))
    progress("TF.js: tensorflowjs's converter on the Keras SavedModels"
             + (" (and on ours, to compare the converters)" if compare_converters else ""))
    converted = tfjs.tensorflowjs(jobs)
    for name, (ours_saved, _) in saved.items():
        ours_dirs[name] = tmp / f"{name}_ours_js"
        error = tfjs.ours(ours_saved, ours_dirs[name])
        model = next(m for m in models if m["model"] == name)
        errors = {"ours": error, "keras": converted[tmp / f"{name}_keras_js"]}
        diagnostic = tmp / f"{name}_ours_tensorflowjs"
        diagnostic_error = converted.get(diagnostic, "not run (--quick)")
        model["tfjs"] = {
            "counts": {"ours": None if error else _counter(tfjs.graph_nodes(ours_dirs[name])),
                       "keras": None if errors["keras"] else _counter(
                           tfjs.graph_nodes(tmp / f"{name}_keras_js")),
                       "ours via tensorflowjs": None if diagnostic_error else _counter(
                           tfjs.graph_nodes(diagnostic))},
            "errors": {k: v for k, v in errors.items() if v},
            "ours_via_tensorflowjs_error": diagnostic_error, "time": {}}
        for side, why in model["tfjs"]["errors"].items():
            progress(f"  {name}: TF.js {side} did not convert: {why[:200]}")
    missing = tfjs.node_missing()
    version = None
    for model in models:
        name, part = model["model"], model.get("tfjs")
        if part is None:
            continue
        if missing:
            part["skipped"] = missing
            continue
        dirs = {"ours": ours_dirs[name], "keras": tmp / f"{name}_keras_js"}
        dirs = {side: d for side, d in dirs.items() if side not in part["errors"]}
        if not dirs:
            continue
        pair = PAIRS[name]
        inputs = {b: pair.inputs(b) for b in batches}
        progress(f"{name}: TF.js in Node, {', '.join(dirs)}")
        timed = tfjs.node_times(dirs, inputs, rounds=rounds)
        version = timed["tfjs"]
        for batch, entry in timed["batches"].items():
            want = np.asarray(PAIRS[name].apply(pair.params, inputs[batch]))
            for side, got in entry["outputs"].items():
                np.testing.assert_allclose(got, want, rtol=RUNTIME_RTOL, atol=RUNTIME_ATOL,
                                           err_msg=f"{name} b{batch}: TF.js {side}")
                key = f"tfjs {side}"
                model["max_abs_diff"][key] = max(model["max_abs_diff"].get(key, 0.0),
                                                 float(np.max(np.abs(got - want))))
            stats = {side: rows.from_harness(harness.summary([ms / 1e3 for ms in samples]))
                     for side, samples in entry["samples_ms"].items()}
            part["time"][str(batch)] = timing = {"calls_per_round": entry["calls_per_round"],
                                                 "settle": entry["settle"], "stats": stats}
            progress(f"  TF.js b{batch}: {_ratio_text(timing)}")
    return version


def run(model_names: list[str], parts: set[str], rounds: int, target_s: float,
        tfjs_rounds: int, tfjs_batches: tuple[int, ...], quick: bool = False) -> dict:
    models, saved = [], {}
    with tempfile.TemporaryDirectory(prefix="plain_vs_handwritten_") as tmp_name:
        tmp = Path(tmp_name)
        for name in model_names:
            progress(f"{name}: building both sides and checking them against jax.jit")
            sides = graphs.tf_functions(PAIRS[name])
            model = {"model": name, "max_abs_diff": {
                f"tf {side}": diff for side, diff in graphs.check_tf(sides).items()}}
            models.append(model)
            if "ops" in parts:
                model["ops"] = {"ours": _counter(graphs.compute_ops(sides.ours)),
                                "keras": _counter(graphs.compute_ops(sides.keras))}
                progress(f"  TF compute ops: ours {sum(model['ops']['ours'].values())}, "
                         f"keras {sum(model['ops']['keras'].values())}")
            if "tf" in parts:
                model["tf"] = measure_tf(sides, rounds, target_s)
            if parts & {"tflite", "tfjs"}:
                saved[name] = graphs.saved_models(sides, tmp)
            if "tflite" in parts:
                model["tflite"] = measure_tflite(sides, saved[name], tmp, rounds, target_s,
                                                 model["max_abs_diff"])
        tfjs_version = (measure_tfjs(models, saved, tmp, tfjs_rounds, tfjs_batches,
                                     compare_converters=not quick)
                        if "tfjs" in parts else None)
    return {"models": models, "tfjs_version": tfjs_version}


def _render(result: dict, out_dir: Path) -> None:
    (out_dir / f"{NAME}.md").write_text(report.markdown(result))
    try:
        report.render(result, out_dir / f"{NAME}.png")
    except ImportError as e:
        progress(f"no plot: {e} (pip install matplotlib)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help="timed rounds per setting (default 30; 5 with --quick)")
    parser.add_argument("--tfjs-rounds", type=int, default=None,
                        help="rounds in Node (default 10; 2 with --quick: pure JS is slow)")
    parser.add_argument("--models", default=",".join(PAIRS))
    parser.add_argument("--only", default=",".join(PARTS), help="of " + ",".join(PARTS))
    parser.add_argument("--quick", action="store_true",
                        help="few rounds, short blocks, TF.js at batch 1 only: checks that "
                        "everything runs (~2 minutes)")
    parser.add_argument("--write", action="store_true",
                        help=f"write benchmarks/results/{NAME}.md, .json, .png")
    parser.add_argument("--out", default=str(harness.RESULTS_DIR), help="results directory")
    parser.add_argument("--render", action="store_true",
                        help=f"only redraw {NAME}.md / .png from the results directory's .json")
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    if args.render:
        _render(json.loads((out_dir / f"{NAME}.json").read_text()), out_dir)
        return
    model_names = [m for m in args.models.split(",") if m]
    parts = {p for p in args.only.split(",") if p}
    unknown = [m for m in model_names if m not in PAIRS] + sorted(parts - set(PARTS))
    if unknown:
        parser.error(f"unknown {unknown}: models are {list(PAIRS)}, parts {list(PARTS)}")
    if keras.backend.backend() != "tensorflow":
        parser.error(f"the Keras models need KERAS_BACKEND=tensorflow, this process has "
                     f"{keras.backend.backend()!r}: run it in a fresh process")
    rounds = args.rounds or (5 if args.quick else 30)
    recorded = harness.LoadRecord()
    tfjs_rounds = args.tfjs_rounds or (2 if args.quick else 10)
    result = run(model_names, parts, rounds, target_s=0.003 if args.quick else 0.01,
                 tfjs_rounds=tfjs_rounds,
                 tfjs_batches=TFJS_BATCHES[:1] if args.quick else TFJS_BATCHES,
                 quick=args.quick)
    load = recorded.finish()
    environment = harness.environment()
    environment["keras"] = keras.__version__
    result.update(
        schema=1, mode="quick" if args.quick else "full", rounds=rounds,
        tfjs_rounds=tfjs_rounds,
        environment=environment, load_average=load, minutes=recorded.minutes,
        machine=harness.machine_sentence(load),
        command="python -m benchmarks.plain_vs_handwritten " + " ".join(
            sys.argv[1:] if argv is None else argv))
    text = report.markdown(result)
    print(text)
    if args.write:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=1, sort_keys=True)
                                              + "\n")
        _render(result, out_dir)
        progress(f"wrote {out_dir / NAME}.{{md,json,png}}")


if __name__ == "__main__":
    main()
