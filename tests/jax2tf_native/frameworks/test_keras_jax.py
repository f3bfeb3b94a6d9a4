"""Keras 3 on the JAX backend: a model from keras.layers (Conv2D, BatchNormalization, Dropout,
Dense; dict inputs) through convert_model, gradients, save_model, reload and verify. Runs in a
subprocess with KERAS_BACKEND=jax: Keras chooses its backend once per process."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def test_keras_jax_model_end_to_end(tmp_path):
    pytest.importorskip("keras", reason="keras (installed with tensorflow) is missing")
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=str(PROJECT_ROOT))
    proc = subprocess.run([sys.executable, "-m", "tests.jax2tf_native.frameworks.keras_jax_main",
                           str(tmp_path)], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "KERAS_JAX_OK" in proc.stdout


def test_keras_on_another_backend_is_refused_with_the_fix():
    keras = pytest.importorskip("keras", reason="keras (installed with tensorflow) is missing")
    if keras.backend.backend() == "jax":
        pytest.skip("this process runs Keras on JAX; the refusal is for other backends")
    import jax2tf_native
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="KERAS_BACKEND=jax"):
        jax2tf_native.convert_model(model)
