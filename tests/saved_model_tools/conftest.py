"""SavedModels shared by the inspect/verify/tflite/warmup tests (built once per session).

- `cnn_model`: the built-in example CNN written by `saved_model_tools.save`, with a second
  signature "classify" (TF post-processing: logits -> top class) sharing the Variables.
- `argmax_model`: a small dense model whose JAX function ends in `jnp.argmax` (an op TFLite
  cannot legalize).
- `peer_model`: a model written with the peer `jax.experimental.jax2tf` and plain
  `tf.saved_model.save`: no jax2tf-native manifest.

Also `BLOCK_JAX`: source to prepend to a `python -I -c` child so that importing JAX fails there.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import saved_model_tools
from jax2tf_native import example_model

PROJECT_ROOT = Path(__file__).resolve().parents[2]

BLOCK_JAX = f"""
import sys
class _NoJax:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("jax", "jaxlib"):
            raise ImportError(f"{{name}} is blocked in this test")
        return None
sys.meta_path.insert(0, _NoJax())
sys.path.insert(0, {str(PROJECT_ROOT)!r})
"""


def tf_env_python(target: str):
    """The python of a venv with TF `target` (built once, cached), or a printed skip when
    JAX2TF_NATIVE_TF_ENV_TESTS=0 says not to build it."""
    from saved_model_tools.verify import tf_envs
    if os.environ.get("JAX2TF_NATIVE_TF_ENV_TESTS") == "0":
        pytest.skip(f"JAX2TF_NATIVE_TF_ENV_TESTS=0: not building the TF {target} venv; run "
                    f"this module without it to serve the model in TF {target}")
    return tf_envs.ensure_tf_env(target, progress=lambda line: print(f"[tf {target}] {line}"))


def run_without_jax(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` in `python -I` with JAX imports blocked before anything else is imported."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-I", "-c", BLOCK_JAX + code, *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def argmax_apply(params, x):
    return {"label": jnp.argmax(x @ params["w"] + params["b"], axis=-1).astype(jnp.int32)}


@pytest.fixture(scope="session")
def cnn_params():
    return example_model.init_params(0)


@pytest.fixture(scope="session")
def cnn_model(tmp_path_factory, cnn_params) -> Path:
    path = tmp_path_factory.mktemp("cnn") / "model"
    classify = saved_model_tools.Signature(
        "classify", postprocess=lambda logits: {
            "class": tf.argmax(logits["logits"], -1, output_type=tf.int32)})
    saved_model_tools.save(path, lambda p, images: {"logits": example_model.apply(p, images)},
                           cnn_params, [example_model.example_images(3)],
                           polymorphic_shapes=[example_model.POLYMORPHIC_SHAPE],
                           input_names=["images"], signatures=[classify])
    return path


@pytest.fixture(scope="session")
def argmax_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("argmax") / "model"
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32),
              "b": np.zeros(3, np.float32)}
    saved_model_tools.save(path, argmax_apply, params,
                           [rng.standard_normal((2, 4)).astype(np.float32)],
                           polymorphic_shapes=["(b, 4)"], input_names=["x"])
    return path


@pytest.fixture(scope="session")
def peer_model(tmp_path_factory) -> Path:
    from jax.experimental import jax2tf

    path = tmp_path_factory.mktemp("peer") / "model"
    module = tf.Module()
    module.w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    dense = jax2tf.convert(lambda w, x: jnp.tanh(x @ w), polymorphic_shapes=[None, "(b, 3)"])
    module.f = tf.function(lambda x: dense(module.w, x), autograph=False,
                           input_signature=[tf.TensorSpec((None, 3), tf.float32, name="x")])
    tf.saved_model.save(module, str(path), signatures=module.f.get_concrete_function())
    return path


@pytest.fixture
def model_copy(tmp_path):
    """Copies a session model so that a test may damage it."""
    def copy(path: Path) -> Path:
        target = tmp_path / path.parent.name
        shutil.copytree(path, target)
        return target
    return copy
