"""The linear-algebra checks in tests/jax2tf_native/linalg_isolated/, each file run in a process of
its own.

Why a subprocess: run in one process with the rest of the suite, TF 2.21 crashed (SIGSEGV
inside the XlaCallModule kernel) after ~700 tests, first at the complex64 column-pivoted QR
check (`test_geqp3_and_pivoted_qr_equal_lapack[c64]`, three runs out of three) and, with that
file isolated, later at a doctest. It never crashed when the file ran alone, nor with either
half of the suite before it: the trigger is state that many earlier compiles leave in the
process, and its cause is not found. The checks themselves are unchanged: every case must pass
in the fresh process, and a crash there fails this test, naming the last test that started.

Speed: each child keeps ~1.5 cores busy. Under pytest-xdist (the default) each test here is a
unit of work of its own, scheduled first (tests/parallel.py); in one process (`-n 0`) they are
background children (tests/conftest.py) that start when collection ends, at low CPU priority,
beside the rest of the suite.
"""
from __future__ import annotations

import pathlib

import pytest

from tools import child_runner, full_matrix

_DIR = pathlib.Path(__file__).parent / "linalg_isolated"
# The heavy linear-algebra files (most of the suite's XLA compiles) run in their own processes
# too, so that the main process carries less of the state the crash needs. The counts are
# minimums of CI's cases (the rest, marked `full_matrix`, are deselected here and run in
# `python -m tools.full_matrix`; tests/matrix.py): a file may gain checks, never silently lose
# them. In the order they start: longest first, so that two side by side end close together.
_CHECKS = {"primitive_checks.py": 16, "symbolic_checks.py": 22,
           "lapack_rewrite_checks.py": 25, "nonsymmetric_checks.py": 37}
# Per child, from its start at the end of collection: a bound for a hang, not a speed target.
_TIMEOUT_S = 3600
# What a passing run's last line may count: tests that passed, the full matrix's cases that
# CI deselects, and warnings.
_ALLOWED_OUTCOMES = {"passed", "deselected", "warning", "warnings"}


def background_jobs(items, directory) -> dict[str, child_runner.Job]:
    """The selected tests' children, which tests/conftest.py starts when collection ends."""
    selected = {item.callspec.params["name"] for item in items}
    # -v writes each test's name as it starts: a crash's output ends at the test that crashed.
    return {f"linalg {name}": child_runner.Job(
        ["-m", "pytest", "-v", "-n", "0", "-p", "no:cacheprovider", str(_DIR / name)],
        timeout=_TIMEOUT_S, what=f"pytest {name}") for name in _CHECKS if name in selected}


@pytest.mark.parametrize("name", list(_CHECKS))
def test_every_linalg_check_passes_in_a_fresh_process(name, background):
    path = _DIR / name
    run = background.result(f"linalg {name}")
    assert run.returncode == 0, (
        f"{path.name} failed in its own process (exit {run.returncode}{run.signal_name}):\n"
        f"{run.output_tail()}")
    summary, outcomes = full_matrix.pytest_summary(run.stdout)
    assert outcomes.get("passed", 0) >= _CHECKS[name], (
        f"{path.name}: {outcomes.get('passed', 0)} passed, expected at least {_CHECKS[name]} "
        f"(last line: {summary!r})")
    others = {k: n for k, n in outcomes.items() if k not in _ALLOWED_OUTCOMES}
    assert not others, (
        f"{path.name}: every check must pass, but the run also had {others} (last line: "
        f"{summary!r}):\n{run.output_tail()}")
