"""Every CLI failure is one error line and a non-zero exit; `--debug` shows the traceback.

tests/reliability/test_bad_inputs.py covers the export options one by one; this adds the
issue's malformed spec, failures nobody anticipated (any exception a command lets escape),
`--debug`, and a real process for the JAX-free entry point.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from saved_model_tools import cli

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "cli_user_model.py").write_text(
        "import jax.numpy as jnp\n"
        "def apply(params, x):\n"
        "    return jnp.tanh(x)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("cli_user_model", None)


def _one_line(err: str, prefix: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix), err
    assert "Traceback" not in err
    return lines[0]


def test_unclosed_input_spec(user_module, capsys):
    code = cli.main(["export", "cli_user_model:apply", "--input", "images:float32[b,28",
                     "--out", str(user_module / "out")])
    line = _one_line(capsys.readouterr().err, "jax2tf-native export: error: ")
    assert code == 2
    assert "--input 'images:float32[b,28' is not NAME:DTYPE[DIMS]. Fix" in line
    assert not (user_module / "out").exists()


@pytest.mark.parametrize("command", ["inspect", "verify", "tflite"])
def test_unexpected_exception_is_one_line_with_the_debug_hint(monkeypatch, capsys, tmp_path,
                                                              command):
    from saved_model_tools import inspect as inspect_lib
    from saved_model_tools import tflite as tflite_lib
    from saved_model_tools import verify as verify_lib

    def boom(*args, **kwargs):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(inspect_lib, "inspect_saved_model", boom)
    monkeypatch.setattr(verify_lib, "verify", boom)
    monkeypatch.setattr(tflite_lib, "convert_to_tflite", boom)
    argv = [command, str(tmp_path)] + (["--out", str(tmp_path / "m.tflite")]
                                       if command == "tflite" else [])
    assert cli.main(argv) == 1
    line = _one_line(capsys.readouterr().err, f"jax2tf-native {command}: error: ")
    assert line.endswith("RuntimeError: first line second line (run with --debug for the "
                         "traceback)")
    with pytest.raises(RuntimeError, match="first line"):
        cli.main([*argv, "--debug"])
    with pytest.raises(RuntimeError, match="first line"):
        cli.main(["--debug", *argv])


def test_interrupt_is_one_line(monkeypatch, capsys, tmp_path):
    from saved_model_tools import inspect as inspect_lib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_lib, "inspect_saved_model", interrupted)
    assert cli.main(["inspect", str(tmp_path)]) == 130
    assert _one_line(capsys.readouterr().err, "jax2tf-native inspect: ") == \
        "jax2tf-native inspect: interrupted"


@pytest.mark.parametrize("argv, code, message", [
    (["inspect", "NOPE"], 2, "NOPE does not exist"),
    (["verify", "NOPE"], 2, "NOPE does not exist"),
    (["tflite", "NOPE", "--out", "x.tflite"], 2, "NOPE does not exist"),
])
def test_saved_model_tools_process_without_jax(tmp_path, argv, code, message):
    """`python -m saved_model_tools` in a real process: exit code and one line."""
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", *argv],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT),
                                   TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == code, proc.stderr
    errors = [l for l in proc.stderr.splitlines() if "error:" in l]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert errors[0].startswith(f"jax2tf-native {argv[0]}: error: ")
    assert "Traceback" not in proc.stderr
    assert os.listdir(tmp_path) == []
