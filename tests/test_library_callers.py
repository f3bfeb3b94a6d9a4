"""Libraries that call `jax.experimental.jax2tf.convert` for their users, with ours in its
place (issue 29): Keras 3's SavedModel export on the JAX backend (`model.export`,
`ExportArchive`), its `JaxLayer`/`FlaxLayer` on the TF backend, and orbax-export's
`JaxModule`/`ExportManager`. Each runs once with the peer's `convert` and once with ours, in
one subprocess per Keras backend (Keras picks its backend at import); both subprocesses run at
once. A small matrix: polymorphic batch, several dynamic dimensions (45 inputs of
(None, None, 3) among them), a cpu+tpu module, gradients, several signatures. Results must
equal JAX's own and the peer's; deliberate differences are listed in docs/compat.md.

tensorflowjs's `convert_jax` needs `enable_xla=False` (issue 27) and is not covered here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.isolated_process import ROOT

_SCRIPTS = {"jax": "tests.library_callers.keras_jax_export",
            "tensorflow": "tests.library_callers.keras_tf_layers"}
_TIMEOUT_S = 900
# Where our result differs from the peer's on purpose (docs/compat.md, "Libraries that call
# convert"): case -> the peer's result.
_DELIBERATE = {"JaxLayer traced at static shapes: output shape": [None, 2]}


@pytest.fixture(scope="module")
def results() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    children = {backend: subprocess.Popen(
        [sys.executable, "-m", script], cwd=ROOT, env={**env, "KERAS_BACKEND": backend},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for backend, script in _SCRIPTS.items()}
    found = {}
    for backend, child in children.items():
        try:
            stdout, stderr = child.communicate(timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in children.values():
                other.kill()
            raise AssertionError(f"{_SCRIPTS[backend]} did not finish in {_TIMEOUT_S} s")
        lines = [l for l in stdout.splitlines() if l.startswith("RESULTS ")]
        assert child.returncode == 0 and lines, (
            f"{_SCRIPTS[backend]} exited {child.returncode}:\n{stdout[-3000:]}\n{stderr[-3000:]}")
        found[backend] = json.loads(lines[-1][len("RESULTS "):])
    return found


def _check(results: dict) -> list[str]:
    for who in ("peer", "ours"):
        assert "error" not in results[who], (who, results[who].get("traceback"))
    cases = sorted(results["jax"])
    assert set(results["peer"]) == set(results["ours"]) == set(cases)
    for case in cases:
        want = results["jax"][case]
        if case in _DELIBERATE:
            assert results["ours"][case] == want, (case, results["ours"][case])
            assert results["peer"][case] == _DELIBERATE[case], (case, results["peer"][case])
            continue
        for who in ("peer", "ours"):
            got = results[who][case]
            assert len(got) == len(want), (case, who)
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                           rtol=2e-5, atol=2e-6, err_msg=f"{case}: {who}")
    return cases


def test_keras_export_and_orbax_export_manager_with_ours_as_jax2tf(results):
    cases = _check(results["jax"])
    assert {"model.export, polymorphic batch", "model.export, 45 inputs (None, None, 3)",
            "ExportArchive, dynamic batch and length", "ExportArchive, cpu+tpu endpoint",
            "ExportArchive, gradient of reloaded", "orbax ExportManager, second signature",
            "orbax JaxModule, parameter gradients"} <= set(cases)


def test_keras_jax_layer_and_flax_layer_with_ours_as_jax2tf(results):
    cases = _check(results["tensorflow"])
    assert {"JaxLayer, dynamic batch and length", "JaxLayer, cpu+tpu",
            "JaxLayer, parameter gradients", "FlaxLayer, parameter gradients"} <= set(cases)
