"""The two sides of one `handwritten_pairs` model in TF.js: ours through the project's TF.js
writer (`saved_model_tools.tfjs.convert_to_tfjs`, what `jax2tf-native tfjs DIR --out OUT`
runs) on the plain SavedModel, the hand-written Keras model through tensorflowjs's own
converter on its SavedModel (`model.export`), default options.

tensorflowjs 4.22 is not a dependency (docs/tfjs.md says why): its Python converter is
installed `pip install --no-deps --target` into a cache directory ($JAX2TF_NATIVE_TFJS_PY,
default ~/.cache/jax2tf_native/tensorflowjs-4.22.0, the one tests/tfjs/test_convert_jax.py
uses) and runs in a child process with it on `sys.path`:
`python -m benchmarks.handwritten_tfjs TFJS_PY_DIR REPORT SAVED_MODEL OUT_DIR OPTIONS ...`.

Node: `npm ci --prefix tests/tfjs` installs @tensorflow/tfjs 4.22; `node_times` runs
benchmarks/tfjs_interleaved.js, which times the models side by side in one Node process.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

from saved_model_tools import tfjs as tfjs_lib

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "tests" / "tfjs" / "node_modules"
SCRIPT = Path(__file__).with_name("tfjs_interleaved.js")
TFJS_PACKAGES = ["tensorflowjs==4.22.0", "tensorflow-hub==0.16.1", "tf-keras==2.21.0"]
NOT_NODES = frozenset({"Placeholder", "Const"})


def node_missing() -> str | None:
    """Why Node timing cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_MODULES / "@tensorflow" / "tfjs").is_dir():
        return f"@tensorflow/tfjs is not installed: run `npm ci --prefix {NODE_MODULES.parent}`"
    return None


def tensorflowjs_dir() -> tuple[Path | None, str | None]:
    """(the tensorflowjs --no-deps install, None) or (None, why it is missing)."""
    target = Path(os.environ.get("JAX2TF_NATIVE_TFJS_PY",
                                 Path.home() / ".cache/jax2tf_native/tensorflowjs-4.22.0"))
    if (target / "tensorflowjs" / "converters" / "tf_saved_model_conversion_v2.py").exists():
        return target, None
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), *TFJS_PACKAGES],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"cannot install tensorflowjs --no-deps: {proc.stderr.strip()[-300:]}"
    return target, None


def ours(saved_model_dir: Path, out: Path) -> str | None:
    """Writes ours to `out`; returns None, or the writer's refusal (nothing written)."""
    try:
        tfjs_lib.convert_to_tfjs(saved_model_dir, out, overwrite=True)
    except tfjs_lib.TfjsExportError as e:
        return " ".join(str(e).split())
    return None


def tensorflowjs(jobs: list[tuple[Path, Path, str]]) -> dict[Path, str | None]:
    """tensorflowjs's converter on each (SavedModel, out, options) in one child process;
    returns {out: None or the converter's error}. Options: "defaults" (the hand-written side),
    or "lenient" (`strip_debug_ops=True, skip_op_check=True`: our SavedModel, for the
    converters' comparison only; it holds `PreventGradient` ops, which the op check refuses)."""
    py_dir, missing = tensorflowjs_dir()
    if missing:
        return {out: missing for _, out, _ in jobs}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        argv = [str(p) for job in jobs for p in job]
        proc = subprocess.run([sys.executable, "-m", "benchmarks.handwritten_tfjs", str(py_dir),
                               str(report), *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=900)
        if proc.returncode != 0:
            return {out: f"converter child failed: {proc.stderr.strip()[-500:]}"
                    for _, out, _ in jobs}
        errors = json.loads(report.read_text())
    return {out: errors[str(out)] for _, out, _ in jobs}


def graph_nodes(model_dir: Path) -> collections.Counter:
    """Op -> count of the nodes of a TF.js model.json (graph and function library), inputs
    and constants (weights) left out."""
    topology = json.loads((model_dir / "model.json").read_text())["modelTopology"]
    nodes = list(topology.get("node", []))
    for function in topology.get("library", {}).get("function", []):
        nodes += function.get("nodeDef", [])
    return collections.Counter(n["op"] for n in nodes if n["op"] not in NOT_NODES)


def node_times(models: dict[str, Path], inputs: dict[int, np.ndarray], *, rounds: int,
               target_ms: float = 10.0) -> dict:
    """Runs benchmarks/tfjs_interleaved.js: per batch, each model's output (numpy) and ms per
    call per round ({"outputs", "samples_ms", "calls_per_round"}), plus the TF.js version."""
    request = {"models": {k: str(v) for k, v in models.items()}, "rounds": rounds,
               "target_ms": target_ms,
               "inputs": {str(b): {"shape": list(x.shape), "data": x.ravel().tolist()}
                          for b, x in inputs.items()}}
    with tempfile.TemporaryDirectory() as tmp:
        request_file, result_file = Path(tmp, "request.json"), Path(tmp, "result.json")
        request_file.write_text(json.dumps(request))
        proc = subprocess.run(["node", str(SCRIPT), str(NODE_MODULES), str(request_file),
                               str(result_file)], capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"node failed: {proc.stderr.strip()[-2000:]}")
        result = json.loads(result_file.read_text())
    for entry in result["batches"].values():
        entry["outputs"] = {k: np.asarray(v["data"], np.float32).reshape(v["shape"])
                            for k, v in entry["outputs"].items()}
    result["batches"] = {int(b): e for b, e in result["batches"].items()}
    return result


def _convert_in_child(py_dir: str, report: str, argv: list[str]) -> None:
    """The child: tensorflowjs's `convert_tf_saved_model` per (SavedModel, out, options)."""
    sys.path.append(py_dir)
    # The converter imports TF-DF only to register its ops; TF-DF 1.12 does not load in TF 2.21
    # (docs/tfjs.md), and these models have none of its ops.
    sys.modules.setdefault("tensorflow_decision_forests",
                           types.ModuleType("tensorflow_decision_forests"))
    from tensorflowjs.converters import tf_saved_model_conversion_v2 as converter

    errors = {}
    lenient = {"strip_debug_ops": True, "skip_op_check": True}
    for saved, out, options in zip(argv[::3], argv[1::3], argv[2::3]):
        try:
            converter.convert_tf_saved_model(saved, out,
                                             **(lenient if options == "lenient" else {}))
            errors[out] = None
        except Exception as e:  # the converter's refusal is a finding, reported per model
            errors[out] = f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
    Path(report).write_text(json.dumps(errors))


if __name__ == "__main__":
    _convert_in_child(sys.argv[1], sys.argv[2], sys.argv[3:])
