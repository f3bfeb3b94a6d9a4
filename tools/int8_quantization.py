"""TFLite full-integer (int8) quantization of the MLP and CNN of benchmarks/handwritten_pairs.py,
ours against the same models written by hand in Keras: their operators and their accuracy
against float JAX.

Ours: `saved_model_tools.save(..., enable_xla=False)` then `saved_model_tools.tflite.int8.
quantize_int8` (the documented route). Keras: `model.export` then the same quantizer. Both are
calibrated on the same representative inputs and checked on the same held-out inputs against
`jax.jit` of the JAX model (the float truth). Writes tools/results/int8_quantization.json and
.md.

    PYTHONPATH=$PWD python tools/int8_quantization.py [--calibration 200] [--held-out 500]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import saved_model_tools  # noqa: E402
from benchmarks.handwritten_pairs import PAIRS  # noqa: E402
from saved_model_tools.tflite import int8 as tflite_int8  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = ("mlp", "cnn")


def quantized_pair(pair, out: Path, calibration: np.ndarray) -> dict:
    """{"ours": Int8Report, "keras": Int8Report} for one `handwritten_pairs` model."""
    ours_dir, keras_dir = out / f"{pair.name}_ours", out / f"{pair.name}_keras"
    saved_model_tools.save(ours_dir, pair.apply, pair.params, [pair.inputs(2)],
                           polymorphic_shapes=[pair.polymorphic_shape], enable_xla=False,
                           with_gradient=False)
    with contextlib.redirect_stdout(io.StringIO()):  # export prints the endpoint's signature
        pair.keras_model(pair.params).export(str(keras_dir), format="tf_saved_model",
                                             verbose=False)
    return {side: tflite_int8.quantize_int8(directory, out / f"{directory.name}.tflite",
                                            calibration)
            for side, directory in (("ours", ours_dir), ("keras", keras_dir))}


def accuracy(report, pair, held_out: np.ndarray) -> dict:
    """The int8 model's outputs (dequantized) against jax.jit on `held_out` inputs."""
    model = Path(report.out_file).read_bytes()
    (name,) = report.input_shape_signatures
    got = np.concatenate([next(iter(tflite_int8.run_int8(model, {name: held_out[i:i + 1]},
                                                         report.signature).values()))
                          for i in range(len(held_out))])
    want = np.asarray(jax.jit(pair.apply)(pair.params, held_out))
    error = np.abs(got - want)
    return {"examples": int(len(held_out)), "max_abs_error": float(error.max()),
            "mean_abs_error": float(error.mean()),
            "relative_error": float(error.max() / np.abs(want).max()),
            "argmax_agreement": float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))}


def run(calibration_size: int, held_out_size: int) -> dict:
    result = {"calibration_examples": calibration_size, "models": {}}
    with tempfile.TemporaryDirectory(prefix="int8_") as temp:
        for name in MODELS:
            pair = PAIRS[name]
            calibration = pair.inputs(calibration_size, seed=11)
            held_out = pair.inputs(held_out_size, seed=12)
            reports = quantized_pair(pair, Path(temp), calibration)
            entry = {}
            for side, report in reports.items():
                entry[side] = {"status": report.status, "operators": report.operators,
                               "float_tensors": report.float_tensors,
                               "errors": list(report.conversion_errors)}
                if report.ok:
                    entry[side]["accuracy_vs_jax"] = accuracy(report, pair, held_out)
            entry["same_operators"] = entry["ours"]["operators"] == entry["keras"]["operators"]
            result["models"][name] = entry
            print(name, json.dumps(entry, indent=1), flush=True)
    return result


def markdown(result: dict) -> str:
    lines = ["# TFLite int8 quantization: ours (enable_xla=False) vs hand-written Keras", "",
             f"Calibration: {result['calibration_examples']} representative inputs; accuracy "
             "on held-out inputs against float `jax.jit` (dequantized int8 outputs). Written by "
             "tools/int8_quantization.py.", "",
             "| model | side | operators | float tensors | max abs error | relative error | "
             "argmax agreement |", "|---|---|---|---|---|---|---|"]
    for name, entry in result["models"].items():
        for side in ("ours", "keras"):
            s = entry[side]
            acc = s.get("accuracy_vs_jax", {})
            ops = ", ".join(f"{k} x{v}" for k, v in s["operators"].items()) or s["status"]
            lines.append(f"| {name} | {side} | {ops} | {s['float_tensors']} | "
                         f"{acc.get('max_abs_error', float('nan')):.4g} | "
                         f"{acc.get('relative_error', float('nan')):.3%} | "
                         f"{acc.get('argmax_agreement', float('nan')):.1%} |")
    lines += ["", "Same operators (ours vs Keras): " + ", ".join(
        f"{n}: {'yes' if e['same_operators'] else 'NO'}" for n, e in result["models"].items())]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration", type=int, default=200)
    parser.add_argument("--held-out", type=int, default=500)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = run(args.calibration, args.held_out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "int8_quantization.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "int8_quantization.md").write_text(markdown(result))


if __name__ == "__main__":
    main()
