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
