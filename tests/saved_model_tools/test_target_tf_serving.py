"""A SavedModel written with `target_tf="2.19"` is served by TensorFlow 2.19 itself.

The model (an erf-GELU and a linear solve) is saved here (JAX 0.10, TF 2.21) and then loaded in
a venv with tensorflow-cpu 2.19 through `tf.saved_model.load` and the TF1 session path TF Serving
uses, in a process where JAX cannot be imported, and compared with JAX's outputs recorded at save
time: `jax2tf-native verify DIR --tf 2.19`. The same model written for the installed TF fails
there, so the test can fail.

The venv is built once under `saved_model_tools.verify.tf_envs.cache_dir()` (73-119 s measured on the
2-core machine with pip's cache warm; a few minutes on a cold one) and reused by later runs, CI
included. Set JAX2TF_NATIVE_TF_ENV_TESTS=0 to skip (e.g. offline); the skip reason is printed
in pytest's summary. Run alone:
`python -m pytest tests/saved_model_tools/test_target_tf_serving.py`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import saved_model_tools
from tests.saved_model_tools.conftest import tf_env_python
from saved_model_tools import cli
from saved_model_tools import manifest, verify

TARGET = "2.19"


def model(params, x):
    h = x @ params["w"]
    h = 0.5 * h * (1 + jax.lax.erf(h / np.float32(np.sqrt(2))))  # erf-GELU
    a = params["a"] @ params["a"].T + 4 * jnp.eye(4, dtype=h.dtype)
    return jnp.linalg.solve(a, h.T).T


PARAMS = {"w": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
          "a": np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)}
EXAMPLE = np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def tf219_python():
    return tf_env_python(TARGET)


@pytest.fixture(scope="module")
def model_for_219(tmp_path_factory):
    path = tmp_path_factory.mktemp("target_tf") / "m"
    record = saved_model_tools.save(path, model, PARAMS, [EXAMPLE],
                                    polymorphic_shapes=["(b, 3)"], input_names=["x"],
                                    target_tf=TARGET)
    return path, record


def _checked_paths(report):
    return {(c.path, c.expected) for c in report.checks}


def test_model_for_tf_219_is_served_by_tf_219(model_for_219, tf219_python):
    path, record = model_for_219
    assert record.target_tf == TARGET and record.stablehlo_version == "1.9.1"
    assert manifest.read(path).target_tf == TARGET
    report = verify.verify(path, python=tf219_python)
    assert report.tensorflow_version.startswith(TARGET + "."), report.tensorflow_version
    assert report.ok, report.format()
    assert not report.jax_imported
    assert {("tf2", "jax reference"), ("tf1-session", "jax reference")} <= _checked_paths(report)
    compared = [c for c in report.checks if c.expected == "jax reference"]
    assert len({c.batch_size for c in compared}) >= 2 and all(c.passed for c in compared)


def test_same_model_for_the_installed_tf_fails_in_tf_219(tmp_path, tf219_python):
    saved_model_tools.save(tmp_path / "m", model, PARAMS, [EXAMPLE],
                           polymorphic_shapes=["(b, 3)"], input_names=["x"])
    report = verify.verify(tmp_path / "m", python=tf219_python)
    assert report.tensorflow_version.startswith(TARGET + ".")
    assert not report.ok and all(not c.passed for c in report.checks)


def test_exported_artifact_saved_for_tf_219_is_served_by_tf_219(tmp_path, tf219_python):
    """A jax.export artifact at calling convention 10 is wrapped at 9 for TF 2.19."""
    from jax2tf_native import linalg_portable
    b, = jax.export.symbolic_shape("b")
    with linalg_portable.export_scope(platforms=("cpu",)) as kwargs:  # JAX's own calls LAPACK
        exported = jax.export.export(jax.jit(model), **kwargs)(
            PARAMS, jax.ShapeDtypeStruct((b, 3), jnp.float32))
    assert exported.calling_convention_version == 10
    # No gradient: the VJP that serialize(vjp_order=1) exports uses JAX's LAPACK lowering.
    saved_model_tools.save_exported(tmp_path / "m", exported.serialize(),
                                    params=PARAMS, example_args=[EXAMPLE], input_names=["x"],
                                    with_gradient=False, target_tf=TARGET)
    report = verify.verify(tmp_path / "m", python=tf219_python)
    assert report.tensorflow_version.startswith(TARGET + ".")
    assert report.ok, report.format()


def test_cli_verify_tf_runs_in_that_tf(model_for_219, tf219_python, capsys):
    code = cli.main(["verify", str(model_for_219[0]), "--tf", TARGET])
    out = capsys.readouterr().out
    assert code == verify.EXIT_PASSED, out
    assert f"with TF {TARGET}." in out and "PASSED" in out
