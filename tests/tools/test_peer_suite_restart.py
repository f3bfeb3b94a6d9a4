"""tools/peer_suite.py past a test process that dies or hangs: the journal the plugin writes
keeps what ran, the rest runs in a fresh process, and the test it died in is run again alone
(its outcome there is the one compared; the death is reported beside it). JAX's
primitives_test once left a process spinning in a native signal handler after 4,810 tests,
which lost every outcome."""
from __future__ import annotations

import subprocess
import sys
import time

from tools import peer_suite

FAKE_TESTS = '''
import os

def test_a_passes():
    pass

def test_b_kills_its_process():
    if os.environ.get("PEER_SUITE_SKIP"):  # in the full run, not when run alone
        os._exit(3)

def test_c_fails():
    assert 1 == 2

def test_d_passes():
    pass
'''


def test_a_crash_is_recorded_and_the_rest_runs_in_a_fresh_process(tmp_path):
    tree = tmp_path / "jax_tree"
    tests = tree / "jax" / "experimental" / "jax2tf" / "tests"
    tests.mkdir(parents=True)
    (tests / "fake_test.py").write_text(FAKE_TESTS)
    (tree / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    out = tmp_path / "jax2tf.peer.json"
    result = peer_suite.run_side(peer_suite.SUITES["jax2tf"], "peer", tree, out, timeout=600,
                                 files=["fake_test.py"])
    outcomes = {k.rsplit("::", 1)[1]: v for k, v in result["outcomes"].items()}
    assert {k: v["outcome"] for k, v in outcomes.items()} == {
        "test_a_passes": "passed", "test_b_kills_its_process": "passed",
        "test_c_fails": "failed", "test_d_passes": "passed"}
    message = outcomes["test_b_kills_its_process"]["message"]
    assert "crashed (exit status 3)" in message and "run alone it passed" in message, message
    (death,) = result["died"]
    assert death["test"].endswith("test_b_kills_its_process") and death["alone"] == "passed"
    assert "assert 1 == 2" in outcomes["test_c_fails"]["message"]
    # The fresh process skipped what had run: each test started once.
    journal = (tmp_path / "jax2tf.peer.json.jsonl").read_text()
    assert journal.count('"started"') == 4 and journal.count("test_a_passes") == 2


def test_a_process_that_records_nothing_is_killed_as_stalled(tmp_path, monkeypatch):
    monkeypatch.setattr(peer_suite, "STALL_S", 1.0)
    proc = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"],
                            start_new_session=True)
    assert peer_suite._wait(proc, tmp_path / "none.jsonl", time.monotonic() + 600) == "stalled"
    assert proc.returncode is not None
