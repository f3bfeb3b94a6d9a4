"""The peer's own suites (tools/peer_suite.py) run outside CI, for tens of minutes per side;
this checks what they left behind: the committed results say that every test the peer passes,
ours passes too, except the deliberate differences, each explained by a docs/compat.md section
that exists. (The behaviours the run found are pinned in
tests/jax2tf_native/test_peer_exceptions.py.)"""
from __future__ import annotations

import json
import re
from pathlib import Path

from tools import peer_suite

ROOT = Path(__file__).resolve().parents[2]
RESULTS = json.loads((ROOT / "tools" / "results" / "peer_suite.json").read_text())


def _compat_sections() -> set[str]:
    text = (ROOT / "docs" / "compat.md").read_text()
    return {re.sub(r"\s*\(.*\)$", "", line[3:]).replace("`", "").strip()
            for line in text.splitlines() if line.startswith("## ")}


def test_every_deliberate_difference_names_a_compat_section():
    sections = _compat_sections()
    for (suite, pattern), (section, why) in peer_suite.DELIBERATE.items():
        assert suite in peer_suite.SUITES, suite
        assert section in sections, (pattern, section, sorted(sections))
        assert why and re.compile(pattern)


def test_the_committed_run_covers_every_suite_and_leaves_nothing_unexplained():
    assert set(RESULTS["suites"]) == set(peer_suite.SUITES)
    for name, suite in RESULTS["suites"].items():
        for side in peer_suite.SIDES:
            assert suite["counts"][side]["passed"] > 0, (name, side)
        unexplained = [w["test"] for w in suite["diff"]["peer_passes_ours_fails"]
                       if w["deliberate"] is None]
        assert unexplained == [], (name, unexplained)
        # Deliberate now means deliberate in the table as it stands, not when the run was made.
        for w in suite["diff"]["peer_passes_ours_fails"]:
            assert list(peer_suite.deliberate(name, w["test"]) or ()) == w["deliberate"], w


def test_the_tests_ours_failed_before_were_run_and_pass_or_are_deliberate():
    """The committed run includes each watched test (those ours failed where the peer passed,
    before they were fixed): ours passes it wherever the peer does, or it is deliberate."""
    for name, patterns in peer_suite.WATCHED.items():
        watched = RESULTS["suites"][name]["watched"]
        assert set(watched) == set(patterns), sorted(watched)
        for pattern, tests in watched.items():
            assert tests, f"{pattern}: not in the committed run"
            for test, outcome in tests.items():
                assert (outcome["ours"] == "passed" or outcome["peer"] != "passed"
                        or peer_suite.deliberate(name, test)), (test, outcome)


def test_the_primitives_run_covers_both_files_and_leaves_nothing_unexplained():
    """primitives_test.py and jax_primitives_coverage_test.py (11,109 tests a side, over an hour
    each here) ran apart from the rest of the default subset: together with peer_suite.json
    they are the whole of it. A test whose process died is compared by its run alone; the
    deaths are listed beside the comparison."""
    primitives = json.loads((ROOT / "tools" / "results" / "peer_suite_primitives.json")
                            .read_text())
    assert primitives["meta"]["jax2tf_files"] == ["primitives_test.py",
                                                  "jax_primitives_coverage_test.py"]
    suite = primitives["suites"]["jax2tf"]
    assert min(suite["counts"][side]["passed"] for side in peer_suite.SIDES) > 10_000
    assert suite["diff"]["peer_passes_ours_fails"] == []
    for deaths in suite["died"].values():
        for death in deaths:
            assert death["how"].startswith(("crashed", "hung")), death
            assert death["alone"] in ("passed", "failed", "skipped"), death
    ran = set(RESULTS["meta"]["jax2tf_files"]) | set(primitives["meta"]["jax2tf_files"])
    assert {"primitives_test.py", "jax_primitives_coverage_test.py", "jax2tf_test.py",
            "shape_poly_test.py", "call_tf_test.py"} <= ran
