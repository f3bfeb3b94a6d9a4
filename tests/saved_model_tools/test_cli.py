"""The command line: `jax2tf-native demo` compares JAX and TF outputs and reports time."""
import re
import subprocess
import sys

from saved_model_tools import cli
from saved_model_tools.demo import jax_vs_tf as demo


def test_demo_reports_agreement_and_timing():
    lines = []
    assert demo.run(batch_sizes=(1, 7), repeats=2, out=lines.append) is True
    rows = [l for l in lines if re.match(r"^\s+\d+\s", l)]
    assert [int(r.split()[0]) for r in rows] == [1, 7]
    for row in rows:
        batch, diff, agree, jax_ms, tf_ms = row.split()
        assert agree == "yes" and float(diff) < 1e-5 and float(jax_ms) > 0 and float(tf_ms) > 0
    assert lines[-1] == "all outputs agree"


def test_cli_demo_exit_code_and_bad_usage():
    assert cli.main(["demo", "--batch-sizes", "2", "--repeats", "1"]) == 0
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "nonsense"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_python_m_jax2tf_native_points_to_the_command_line():
    """The command line lives in the top layer; `python -m jax2tf_native` names it, exit 2."""
    proc = subprocess.run([sys.executable, "-m", "jax2tf_native", "demo"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "python -m saved_model_tools" in proc.stderr and "jax2tf-native" in proc.stderr
