"""tensorflowjs's own `convert_jax` with our `convert` in jax2tf's place: a Flax Linen CNN
(conv, max/avg pool, GELU, softmax, Dense) and a transformer block (causal attention, layer
norm, GELU MLP), `None` batch, run in Node with @tensorflow/tfjs at two batch sizes against JAX.

tensorflowjs 4.22 (only its Python converter) is installed `pip install --no-deps --target`
into a cache directory ($JAX2TF_NATIVE_TFJS_PY, default ~/.cache/jax2tf_native/tensorflowjs-4.22.0)
the first time: not a dependency of ours, nor an extra (its declared dependencies would replace
our stack); when pip cannot reach the registry the test skips with the reason.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from saved_model_tools import tfjs
from tools import tfjs_runtimes

pytest.importorskip("flax", reason="the models are Flax Linen modules (the frameworks extra)")
from tests.tfjs import convert_jax_models  # noqa: E402  (after the flax check)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TFJS_PACKAGES = ["tensorflowjs==4.22.0", "tensorflow-hub==0.16.1", "tf-keras==2.21.0"]


def _tfjs_py_dir() -> Path:
    target = Path(os.environ.get("JAX2TF_NATIVE_TFJS_PY",
                                 Path.home() / ".cache/jax2tf_native/tensorflowjs-4.22.0"))
    if (target / "tensorflowjs" / "converters" / "jax_conversion.py").exists():
        return target
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), *TFJS_PACKAGES],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot install tensorflowjs --no-deps into {target}: "
                    f"{proc.stderr.strip()[-500:]}")
    return target


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tfjs_runtimes.require_node()
    out = tmp_path_factory.mktemp("convert_jax")
    proc = subprocess.run([sys.executable, "-m", "tests.tfjs.convert_jax_models",
                           str(_tfjs_py_dir()), str(out)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.mark.parametrize("name", sorted(convert_jax_models.MODELS))
def test_convert_jax_with_our_convert_runs_in_node(converted, name):
    model_json = json.loads((converted / name / "model.json").read_text())
    signature = model_json["signature"]
    (input_name,) = signature["inputs"]
    assert signature["inputs"][input_name]["tensorShape"]["dim"][0]["size"] == "-1"  # None batch
    ops = {n["op"] for n in model_json["modelTopology"]["node"]}
    assert ops <= tfjs.supported_ops()[1] | {"_FusedConv2D", "_FusedMatMul"}, ops
    model, params = convert_jax_models.model_and_params(name)
    for batch in (1, 5):
        x = np.random.RandomState(batch).randn(batch, *convert_jax_models.SHAPES[name]) \
            .astype(np.float32)
        (got,), _ = tfjs_runtimes.run_in_node(converted / name, {input_name: x})
        np.testing.assert_allclose(got, np.asarray(jax.jit(model.apply)(params, x)),
                                   rtol=1e-4, atol=1e-5)
