"""The full matrix (tools/full_matrix.py): CI runs a slice of the large parametrized checks;
the committed result of the whole matrix must be for today's sources."""
import json

from tools import full_matrix


def test_committed_full_matrix_ran_on_todays_sources_and_passed():
    problems = full_matrix.check()
    assert not problems, "\n".join(problems)
    summary = json.loads((full_matrix.RESULTS / "summary.json").read_text())
    for path, result in summary["files"].items():   # no case was left out there
        assert "deselected" not in result["outcomes"], (path, result["last_line"])
        assert result["outcomes"]["passed"] > 0, (path, result["last_line"])


def test_a_stale_or_failed_result_is_reported(tmp_path):
    import jax
    import tensorflow as tf
    summary = {"sources_digest": full_matrix.sources_digest(), "passed": True, "date": "d",
               "jax": jax.__version__, "tensorflow": tf.__version__, "wall_seconds": 1,
               "files": {p: {"outcomes": {"passed": 1}, "returncode": 0, "last_line": "1 passed"}
                         for p in full_matrix.FILES}}
    full_matrix.write(summary, tmp_path)
    assert full_matrix.check(tmp_path) == []
    summary["sources_digest"] = "0" * 64
    summary["passed"] = False
    summary["files"][full_matrix.FILES[0]]["returncode"] = 1
    full_matrix.write(summary, tmp_path)
    problems = full_matrix.check(tmp_path)
    assert len(problems) == 2, problems
    assert "changed since the full matrix last ran" in problems[0]
    assert full_matrix.FILES[0] in problems[1]
    summary.update(passed=True, sources_digest=full_matrix.sources_digest(), jax="0.4.1")
    summary["files"][full_matrix.FILES[0]]["returncode"] = 0
    full_matrix.write(summary, tmp_path)
    (problem,) = full_matrix.check(tmp_path)
    assert f"ran on jax 0.4.1, TensorFlow {tf.__version__}; this is jax {jax.__version__}" \
        in problem
