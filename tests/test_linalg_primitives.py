"""The linear-algebra checks in tests/linalg_isolated/, each file run in a process of its own.

Why a subprocess: run in one process with the rest of the suite, TF 2.21 crashed (SIGSEGV
inside the XlaCallModule kernel) after ~700 tests, first at the complex64 column-pivoted QR
check (`test_geqp3_and_pivoted_qr_equal_lapack[c64]`, three runs out of three) and, with that
file isolated, later at a doctest. It never crashed when the file ran alone, nor with either
half of the suite before it: the trigger is state that many earlier compiles leave in the
process, and its cause is not found. The checks themselves are unchanged: every case must pass
in the fresh process, and a crash there fails this test, naming the last test that started.
"""
from __future__ import annotations

import pathlib
import re

import pytest

from tests import isolated_process

_DIR = pathlib.Path(__file__).parent / "linalg_isolated"
# The heavy linear-algebra files (most of the suite's XLA compiles) run in their own processes
# too, so that the main process carries less of the state the crash needs. The counts are
# minimums: a file may gain checks, never silently lose them.
_CHECKS = {"primitive_checks.py": 46, "nonsymmetric_checks.py": 60,
           "lapack_rewrite_checks.py": 58, "symbolic_checks.py": 28}
_TIMEOUT_S = 1800
# What a passing run's last line may count: tests that passed, and warnings.
_ALLOWED_OUTCOMES = {"passed", "warning", "warnings"}


def _outcomes(summary: str) -> dict[str, int]:
    """{"passed": 40, "warnings": 2, ...} from pytest's last line ("40 passed, 2 warnings in
    81.20s (0:01:21)")."""
    counts = summary.split(" in ")[0]
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", counts)}


@pytest.mark.parametrize("name", sorted(_CHECKS))
def test_every_linalg_check_passes_in_a_fresh_process(name):
    path = _DIR / name
    # -v writes each test's name as it starts: a crash's output ends at the test that crashed.
    run = isolated_process.run_python(
        ["-m", "pytest", "-v", "-p", "no:cacheprovider", str(path)], timeout=_TIMEOUT_S,
        what=f"pytest {path.name}")
    assert run.returncode == 0, (
        f"{path.name} failed in its own process (exit {run.returncode}{run.signal_name}):\n"
        f"{run.output_tail()}")
    summary = run.stdout.strip().splitlines()[-1].strip("= ") if run.stdout.strip() else ""
    outcomes = _outcomes(summary)
    assert outcomes.get("passed", 0) >= _CHECKS[name], (
        f"{path.name}: {outcomes.get('passed', 0)} passed, expected at least {_CHECKS[name]} "
        f"(last line: {summary!r})")
    others = {k: n for k, n in outcomes.items() if k not in _ALLOWED_OUTCOMES}
    assert not others, (
        f"{path.name}: every check must pass, but the run also had {others} (last line: "
        f"{summary!r}):\n{run.output_tail()}")
