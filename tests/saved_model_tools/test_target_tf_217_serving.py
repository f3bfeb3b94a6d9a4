"""A SavedModel with batched gathers, written with `target_tf="2.17"`, is served by TF 2.17 itself.

TF 2.17's XLA rejects gathers/scatters with batching dimensions (what `jax.vmap` of indexing
writes; measured by tools/tf_version_matrix.py), so `target_tf="2.17"` spells the batch out as
explicit indices (tf_ops.gather_batching). The model is saved here (JAX 0.10, TF 2.21), loaded in
a venv with tensorflow-cpu 2.17 through `tf.saved_model.load` and the TF1 session path, in a
process where JAX cannot be imported, and compared with JAX's outputs recorded at save time
(`jax2tf-native verify DIR --tf 2.17`). The same model written without the rewrite fails there,
so the test can fail.

The venv is built once under `saved_model_tools.verify.tf_envs.cache_dir()` (as the TF 2.19 one of
test_target_tf_serving.py) and reused. Set JAX2TF_NATIVE_TF_ENV_TESTS=0 to skip (e.g. offline);
the skip reason is printed in pytest's summary.
"""

import jax
import numpy as np
import pytest

import saved_model_tools
from tests.saved_model_tools.conftest import tf_env_python
from saved_model_tools import verify
from tf_ops import tf_targets

TARGET = "2.17"


def model(params, x):
    # Per row: read the entry after the row's argmax and add it there (a batched gather and a
    # batched scatter), then a dense layer.
    idx = x.argmax(axis=1)
    rows = jax.vmap(lambda r, i: r.at[i].add(r[(i + 1) % r.shape[0]]))(x, idx)
    return rows @ params["w"]


PARAMS = {"w": np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)}
EXAMPLE = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def tf217_python():
    return tf_env_python(TARGET)


def _save(path):
    return saved_model_tools.save(path, model, PARAMS, [EXAMPLE], polymorphic_shapes=["(b, 4)"],
                                  input_names=["x"], target_tf=TARGET)


def test_batched_gathers_for_tf_217_are_served_by_tf_217(tmp_path, tf217_python):
    record = _save(tmp_path / "m")
    assert record.target_tf == TARGET and record.stablehlo_version == "1.1.1"
    report = verify.verify(tmp_path / "m", python=tf217_python)
    assert report.tensorflow_version.startswith(TARGET + "."), report.tensorflow_version
    assert report.ok, report.format()
    assert not report.jax_imported
    compared = [c for c in report.checks if c.expected == "jax reference"]
    assert {c.path for c in compared} >= {"tf2", "tf1-session"}
    assert len({c.batch_size for c in compared}) >= 2 and all(c.passed for c in compared)


def test_without_the_rewrite_tf_217_fails(tmp_path, tf217_python, monkeypatch):
    monkeypatch.setattr(tf_targets, "rewrites_for", lambda target: [])
    monkeypatch.setattr(tf_targets, "failing_features", lambda target: [])
    _save(tmp_path / "m")
    report = verify.verify(tmp_path / "m", python=tf217_python)
    assert report.tensorflow_version.startswith(TARGET + ".")
    assert not report.ok and all(not c.passed for c in report.checks)
