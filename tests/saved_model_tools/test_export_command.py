"""`jax2tf-native export MODULE:FUNCTION --params FILE --input NAME:DTYPE[DIMS] --out DIR`."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from saved_model_tools import cli
from saved_model_tools import manifest
from saved_model_tools.cli import export as export_command

PROJECT_ROOT = Path(__file__).resolve().parents[2]
USER_MODULE = textwrap.dedent("""
    import jax.numpy as jnp

    def predict(params, features, mask):
        hidden = jnp.tanh(features @ params["dense"]["w"] + params["dense"]["b"])
        return {"score": jnp.sum(hidden, axis=-1) * mask}
""")


@pytest.fixture
def user_project(tmp_path, monkeypatch):
    (tmp_path / "user_model.py").write_text(USER_MODULE)
    rng = np.random.default_rng(0)
    params = {"dense/w": rng.standard_normal((3, 4)).astype(np.float32),
              "dense/b": rng.standard_normal((4,)).astype(np.float32)}
    np.savez(tmp_path / "params.npz", **params)
    monkeypatch.chdir(tmp_path)
    yield tmp_path, params
    sys.modules.pop("user_model", None)


def test_export_writes_a_verified_model_with_progress(user_project, capsys):
    """Also JAX's short dtype names (issue 37): `float` and `f32` are float32, as in JAX, not
    NumPy's float64."""
    path, params = user_project
    code = cli.main(["export", "user_model:predict", "--params", "params.npz",
                     "--input", "features:float[b,3]", "--input", "mask:f32[b]",
                     "--out", "out/1"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("loaded user_model:predict")
    assert [l.split("]")[0] + "]" for l in lines[1:6]] == [f"[{i}/5]" for i in range(1, 6)]
    assert lines[6].startswith("saved out/1 in ")
    assert lines[7].startswith("verify without JAX: passed, ")
    assert lines[-1].startswith("done in ")
    record = manifest.read(path / "out" / "1")
    sig = record.signature("serving_default")
    assert [(t.name, t.dtype, t.polymorphic_shape) for t in sig.inputs] == [
        ("features", "float32", "(b, 3)"), ("mask", "float32", "(b)")]
    loaded = tf.saved_model.load(str(path / "out" / "1"))
    specs = loaded.signatures["serving_default"].structured_input_signature[1]
    assert {k: v.dtype for k, v in specs.items()} == {"features": tf.float32, "mask": tf.float32}
    features = np.ones((5, 3), np.float32)
    mask = np.arange(5, dtype=np.float32)
    got = loaded.signatures["serving_default"](features=features, mask=mask)["score"].numpy()
    want = np.tanh(features @ params["dense/w"] + params["dense/b"]).sum(-1) * mask
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("argv, code, message", [
    (["export", "no_such_module:f", "--input", "x:float32[3]", "--out", "o"], 2,
     "cannot import module 'no_such_module'"),
    (["export", "user_model:missing", "--input", "x:float32[3]", "--out", "o"], 2,
     "has no 'missing'"),
    (["export", "user_model", "--input", "x:float32[3]", "--out", "o"], 2, "not MODULE:FUNCTION"),
    (["export", "user_model:predict", "--params", "params.npz", "--input", "features=float32",
      "--out", "o"], 2, "is not NAME:DTYPE"),
    (["export", "user_model:predict", "--params", "nope.npz", "--input", "x:float32[3]",
      "--out", "o"], 2, "no such file"),
    (["export", "user_model:predict", "--params", "params.npz", "--input", "features:floaty[3]",
      "--out", "o"], 2, "unknown dtype 'floaty'. Fix: --input features:float32[3] (dtypes: "),
])
def test_export_errors_exit_non_zero_and_write_nothing(user_project, capsys, argv, code, message):
    path, _ = user_project
    assert cli.main(argv) == code
    assert message in capsys.readouterr().err
    assert not (path / "o").exists()


def test_export_refuses_to_replace_without_overwrite(user_project, capsys):
    path, _ = user_project
    argv = ["export", "user_model:predict", "--params", "params.npz", "--input",
            "features:float32[b,3]", "--input", "mask:float32[b]", "--out", "m", "--no-verify"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 1
    assert "overwrite" in capsys.readouterr().err
    assert cli.main(argv + ["--overwrite"]) == 0


def test_parse_input():
    assert export_command.parse_input("images:uint8[b, 28, 28, 1]") == (
        "images", "uint8", ["b", "28", "28", "1"])
    assert export_command.parse_input("scale:float32[]") == ("scale", "float32", [])


@pytest.mark.parametrize("spelled, dtype", [
    ("float", "float32"), ("f32", "float32"), ("int", "int32"), ("i32", "int32"),
    ("uint", "uint32"), ("complex", "complex64"), ("bf16", "bfloat16"), ("f64", "float64"),
    ("double", "float64"), ("i64", "int64"), ("u8", "uint8"), ("bool", "bool"),
    ("Float32", "float32")])
def test_jax_short_dtype_names(spelled, dtype):
    """As in JAX without x64 (`jnp.zeros(2, float)` is float32), not NumPy (float64)."""
    assert export_command.parse_input(f"x:{spelled}[b,3]") == ("x", dtype, ["b", "3"])


def _command(cwd, *argv):
    """`python -X importtime -m saved_model_tools ...` as a user runs it: (exit code, the
    stderr lines that are not import-time lines, the modules it imported)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "saved_model_tools", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    lines = proc.stderr.splitlines()
    imported = {l.split("|")[-1].strip() for l in lines if l.startswith("import time:")}
    return proc.returncode, [l for l in lines if not l.startswith("import time:")], imported


@pytest.fixture(scope="module")
def bad_input_project(tmp_path_factory):
    """The CLI guide's model (a 3-wide first layer) with its parameters, and a copy of them
    saved under a misspelt key."""
    path = tmp_path_factory.mktemp("cli_bad_inputs")
    (path / "cli_guide_model.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp

        def predict(params, x):
            hidden = jnp.tanh(x @ params["dense1"]["w"] + params["dense1"]["b"])
            return hidden @ params["dense2"]["w"]
    """))
    rng = np.random.default_rng(0)
    params = {"dense1/w": rng.normal(size=(3, 8)).astype(np.float32),
              "dense1/b": np.zeros(8, np.float32),
              "dense2/w": rng.normal(size=(8, 2)).astype(np.float32)}
    np.savez(path / "params.npz", **params)
    params["dense1/W"] = params.pop("dense1/w")
    np.savez(path / "misspelt.npz", **params)
    return path


@pytest.mark.parametrize("argv, message", [
    (["--params", "params.npz", "--input", "x:float32[b,4]"],
     "--input x:float32[b,4] does not fit cli_guide_model:predict: dimension 1 of x is 4 where "
     "the function needs 3 (cli_guide_model.py:5 `hidden = jnp.tanh(x @ params[\"dense1\"][\"w\"] "
     "+ params[\"dense1\"][\"b\"])`: dot_general requires contracting dimensions to have the "
     "same shape, got (4,) and (3,)). Fix: --input x:float32[b,3]."),
    (["--params", "misspelt.npz", "--input", "x:float32[b,3]"],
     "cli_guide_model:predict reads params['dense1']['w'], which --params misspelt.npz does not "
     "have: under dense1 it has ['W', 'b']. Fix: store that parameter under the key 'dense1/w' "
     "in the file (the file has 'dense1/W'), or read the name the file uses in the function."),
    (["--input", "x:float32[b,3]"],
     "cli_guide_model:predict reads params['dense1'], and no --params was given. Fix: pass "
     "--params FILE.npz with the parameters (keys nest with '/': 'dense1' for "
     "params['dense1']), or a Flax .msgpack file."),
])
def test_bad_inputs_name_the_input_or_parameter_before_tensorflow(bad_input_project, argv,
                                                                  message):
    """Issue 37: each was JAX's raw TypeError or a bare KeyError, exit 1, after importing
    TensorFlow. Now: exit 2, our one line, TensorFlow never imported, nothing written."""
    code, errors, imported = _command(bad_input_project, "export", "cli_guide_model:predict",
                                      *argv, "--out", "models/m/1")
    assert (code, errors) == (2, [f"jax2tf-native export: error: {message}"])
    assert "tensorflow" not in imported and "jax" in imported
    assert not (bad_input_project / "models").exists()


def test_a_misspelt_dtype_fails_before_jax_and_lists_the_dtypes(bad_input_project):
    code, errors, imported = _command(bad_input_project, "export", "cli_guide_model:predict",
                                      "--params", "params.npz", "--input", "x:flaot32[b,3]",
                                      "--out", "models/m/1")
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith("jax2tf-native export: error: --input 'x:flaot32[b,3]': unknown "
                                "dtype 'flaot32'. Fix: --input x:float32[b,3] (dtypes: float32 "
                                "(float, f32), float16 (f16, half), bfloat16 (bf16), "), errors
    assert not {"tensorflow", "jax"} & imported
    assert not (bad_input_project / "models").exists()


def test_export_help_lists_the_dtypes_in_one_spelling_without_internals():
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "export", "--help"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    text = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "float32 (float, f32)" in text and "int32 (int, i32)" in text
    assert "float is float32 and int is int32, as in JAX" in text
    assert "`" not in text, "raw Markdown backticks"
    assert "saved_model_tools" not in text and "lazy" not in text, "internal notes"
    assert "NAME:DTYPE[DIMS]" in text and "[SPEC]" not in text


@pytest.mark.parametrize("option, message", [
    (["--platforms", "cpu,vulkan"],
     "--platforms cpu,vulkan: unknown platform(s) ['vulkan']. Fix: a comma-separated subset of "
     "cpu, cuda, rocm, tpu (gpu means cuda), e.g. --platforms cpu,cuda."),
    (["--target-tf", "2.2"],
     "--target-tf 2.2: not a TensorFlow version we measured; supported: 2.17, 2.18, 2.19, 2.20, "
     "2.21. Fix: the serving TF's major.minor version, e.g. --target-tf 2.20, or leave it out "
     "for the installed TF."),
])
def test_bad_platforms_and_target_tf_fail_before_jax_and_tensorflow(bad_input_project, option,
                                                                     message):
    """They ended after the TF import (10 s) as `ValueError: platforms must be a sequence ...
    Fix: e.g. platforms=('cpu', 'cuda')` / `target_tf='2.99' ...`, exit 1, in the library's
    spelling. Now the option as typed, exit 2, nothing written."""
    code, errors, imported = _command(bad_input_project, "export", "cli_guide_model:predict",
                                      "--params", "params.npz", "--input", "x:float32[b,3]",
                                      *option, "--out", "models/m/1")
    assert (code, errors) == (2, [f"jax2tf-native export: error: {message}"])
    assert not {"tensorflow", "jax"} & imported
    assert not (bad_input_project / "models").exists()


def test_platform_names_as_jax_spells_them():
    assert export_command.check_platforms("CPU,gpu") == ["cpu", "cuda"]
    assert export_command.check_platforms(None) is None
