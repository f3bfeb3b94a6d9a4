"""`jax2tf-native export MODULE:FUNCTION --params FILE --input NAME:DTYPE[SPEC] --out DIR`."""
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from saved_model_tools import cli
from saved_model_tools import export_command, manifest

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
    path, params = user_project
    code = cli.main(["export", "user_model:predict", "--params", "params.npz",
                     "--input", "features:float32[b,3]", "--input", "mask:float32[b]",
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
    assert [(t.name, t.polymorphic_shape) for t in sig.inputs] == [("features", "(b, 3)"),
                                                                   ("mask", "(b)")]
    loaded = tf.saved_model.load(str(path / "out" / "1"))
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
      "--out", "o"], 2, "unknown dtype 'floaty'"),
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
