"""Libraries that call `jax.experimental.jax2tf.convert` for their users, with ours in its
place (issue 29): Keras 3's SavedModel export on the JAX backend (`model.export`,
`ExportArchive`), its `JaxLayer`/`FlaxLayer` on the TF backend, and orbax-export's
`JaxModule`/`ExportManager`. Each runs once with the peer's `convert` and once with ours, in
one subprocess per Keras backend (Keras picks its backend at import), both background children
(tests/conftest.py) that run beside the rest of the suite. A small matrix: polymorphic batch,
several dynamic dimensions (45 inputs of (None, None, 3) among them), a cpu+tpu module,
gradients, several signatures. Results must equal JAX's own and the peer's; deliberate
differences are listed in docs/compat.md.

tensorflowjs's `convert_jax` needs `enable_xla=False` (issue 27) and is not covered here.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tools import child_runner

_SCRIPTS = {"jax": "tests.jax2tf_native.library_callers.keras_jax_export",
            "tensorflow": "tests.jax2tf_native.library_callers.keras_tf_layers"}
_TIMEOUT_S = 3600   # from the child's start at the end of collection: a bound for a hang
# Where our result differs from the peer's on purpose (docs/compat.md, "Libraries that call
# convert"): case -> the peer's result.
_DELIBERATE = {"JaxLayer traced at static shapes: output shape": [None, 2]}


def background_jobs(items, directory) -> dict[str, child_runner.Job]:
    """One child per Keras backend, which tests/conftest.py starts when collection ends."""
    return {f"library callers {backend}": child_runner.Job(
        ["-m", script], timeout=_TIMEOUT_S, what=script, env={"KERAS_BACKEND": backend})
        for backend, script in _SCRIPTS.items()}


@pytest.fixture(scope="module")
def results(background) -> dict:
    found = {}
    for backend, script in _SCRIPTS.items():
        run = background.result(f"library callers {backend}")
        lines = [l for l in run.stdout.splitlines() if l.startswith("RESULTS ")]
        assert run.returncode == 0 and lines, (
            f"{script} exited {run.returncode}{run.signal_name}:\n{run.output_tail(3000)}")
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
