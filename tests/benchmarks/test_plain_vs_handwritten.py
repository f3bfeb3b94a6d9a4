"""benchmarks/plain_vs_handwritten.py end to end on one model with op counts only: both sides
built and checked against jax.jit, their graphs counted, the JSON, markdown and plot written,
and the report's cells and target checks consistent with the counts. Never how fast anything
is: timings belong to benchmarks/, not tests."""
import json

import pytest

from benchmarks import handwritten_graphs, handwritten_report, plain_vs_handwritten


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    plain_vs_handwritten.main(["--models", "resnet", "--only", "ops", "--quick", "--write",
                               "--out", str(out)])
    return out, json.loads((out / "plain_vs_handwritten.json").read_text())


def test_both_sides_agree_with_jax_and_are_counted(written):
    _, result = written
    (model,) = result["models"]
    assert model["model"] == "resnet"
    assert model["max_abs_diff"]["tf ours"] <= 1e-5 * 10   # atol + rtol * |values| (< 10)
    assert model["max_abs_diff"]["tf keras"] <= 2e-4 * 10
    # Our ReLUs are Maximum(x, 0) in TF (tf_ops.nan_guards.relu: Grappler cannot fuse them).
    for side, relu in (("ours", "Maximum"), ("keras", "Relu")):
        counts = model["ops"][side]
        assert counts["Conv2D"] == 2, counts   # the block's two 3x3 convolutions
        assert counts[relu] == 2, counts
        assert not set(counts) & handwritten_graphs.NOT_COMPUTE, counts


def test_targets_and_cells_follow_the_counts(written):
    out, result = written
    checks = handwritten_report.checks(result)["resnet"]
    ours, keras = (sum(result["models"][0]["ops"][s].values()) for s in ("ours", "keras"))
    ops = checks["tf_ops"]
    assert (ops["ours"], ops["keras"]) == (ours, keras)
    assert ops["ratio"] == pytest.approx(ours / keras)
    assert ops["status"] == ("pass" if ours / keras <= handwritten_report.OPS_LIMIT else "FAIL")
    assert all(c["status"] == "not run" for k, c in checks.items() if k != "tf_ops")
    text = (out / "plain_vs_handwritten.md").read_text()
    assert text == handwritten_report.markdown(result)
    row = next(line for line in text.splitlines() if line.startswith("| resnet |"))
    assert f"{ours} / {keras} = **{ours / keras:.2f}**" in row
    assert (out / "plain_vs_handwritten.png").stat().st_size > 10_000
