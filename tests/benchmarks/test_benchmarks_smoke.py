"""The benchmark runner end to end on a tiny workload: harness -> rows -> targets -> JSON,
markdown and plot. Checks structure and that every number is consistent with the measurements
(never how fast anything is: timings belong to benchmarks/, not tests)."""
import json

import pytest

from benchmarks import dispatch, harness, report, rows, run, targets

ROUNDS = 3


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    section = dispatch.section(dispatch.run(rounds=ROUNDS))
    result = run.assemble([section], "smoke", 1.0, "pytest")
    out = tmp_path_factory.mktemp("bench")
    return result, run.write(result, out, plot=True)


def test_json_holds_the_measured_rows(written):
    result, paths = written
    data = json.loads(paths["json"].read_text())
    assert data["mode"] == "smoke" and data["schema"] == 1
    assert set(data["environment"]) >= {"jax", "tensorflow", "cpus"}
    (section,) = data["sections"]
    assert section["group"] == "dispatch"
    assert [r["setting"] for r in section["rows"]] == ["eager", "tf.function"]
    for row in section["rows"]:
        for side in rows.SIDES:
            s = row[side]
            assert s["n"] == ROUNDS
            assert 0 < s["p10"] <= s["median"] <= s["p90"], (side, s)
        assert row["ratios"]["ours/jax"] == pytest.approx(row["ours"]["median"]
                                                          / row["jax"]["median"])
        assert row["ratios"]["ours/peer"] == pytest.approx(row["ours"]["median"]
                                                           / row["peer"]["median"])
        assert row["labels"] == {"jax": "jax.jit", "peer": f"jax2tf {row['setting']}",
                                 "ours": f"ours {row['setting']}"}


def test_targets_are_computed_from_the_rows(written):
    result, _ = written
    eager, graph = result["sections"][0]["rows"]
    (dispatch_check,) = [c for c in result["targets"] if c["target"].startswith("tiny call")]
    want = eager["ours"]["median"] / graph["ours"]["median"]
    assert dispatch_check["value"] == pytest.approx(want)
    assert dispatch_check["met"] == (want <= targets.EAGER_OVER_GRAPH_LIMIT)
    peer_checks = [c for c in result["targets"] if c["target"] == "every row: ours <= jax2tf"]
    assert len(peer_checks) == 2


def test_markdown_has_the_tables(written):
    result, paths = written
    text = paths["md"].read_text()
    assert text == report.markdown(result)
    assert "## Targets" in text and "## Tiny-function dispatch" in text
    eager = result["sections"][0]["rows"][0]
    line = next(l for l in text.splitlines() if l.startswith("| tiny sin(x)*2 | eager |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == report.fmt_stats(eager["jax"], "s")
    assert cells[-4] == f"{eager['ratios']['ours/jax']:.2f}"
    assert cells[-1] == report.fmt_paired(eager["paired"]["ours/peer"])


def test_plot_written_when_matplotlib_is_installed(written):
    _, paths = written
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "png" not in paths
        print("matplotlib not installed: checked that no plot is claimed")
        return
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_target_checks_on_known_rows():
    stat = rows.single
    forward_rows = [
        rows.row("mlp b256", "tf.function", jax=stat(1.0), jax_label="jax.jit", peer=stat(1.2),
                 peer_label="jax2tf", ours=stat(1.04), ours_label="ours"),
        rows.row("mlp b256", "tf.function", jax=stat(1.0), jax_label="jax.jit", peer=stat(1.0),
                 peer_label="jax2tf", ours=stat(1.10), ours_label="ours (residuals)"),
        rows.row("mlp b1", "tf.function", jax=stat(1.0), jax_label="jax.jit", peer=stat(1.0),
                 peer_label="jax2tf", ours=stat(3.0), ours_label="ours"),
    ]
    checks = targets.evaluate([rows.section("forward", "Forward", "", forward_rows)])
    forward = [(c["ours"], c["met"]) for c in checks if c["target"].startswith("forward")]
    assert forward == [("ours", True), ("ours (residuals)", False)]  # batch 1 is not a target
    vs_peer = [c["met"] for c in checks if c["target"] == "every row: ours <= jax2tf"]
    assert vs_peer == [True, False, False]
    assert targets.summary(checks)["every row: ours <= jax2tf"] == {
        "met": 1, "total": 3, "missed_within_noise": 0}


def test_rounds_change_order_and_pair_the_samples():
    orders = harness.round_orders(["a", "b", "c"], 12)
    assert all(sorted(o) == ["a", "b", "c"] for o in orders)
    # Over two cycles of the 6 permutations each candidate follows each other equally often.
    follows = [(o[i - 1], o[i]) for o in orders for i in range(1, 3)]
    assert {pair: follows.count(pair) for pair in set(follows)} == {
        (x, y): 4 for x in "abc" for y in "abc" if x != y}
    calls = []
    stats = harness.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                rounds=4, warmup=0, settle=1, calls_per_round=2)
    assert len(calls) == 4 * 2 * 3 and stats["a"]["n"] == len(stats["a"]["samples_s"]) == 4
    ours = rows.from_harness({"median_s": 2.0, "p10_s": 1.0, "p90_s": 3.0, "n": 3,
                              "samples_s": [1.0, 2.0, 3.0]})
    peer = rows.from_harness({"median_s": 1.0, "p10_s": 1.0, "p90_s": 4.0, "n": 3,
                              "samples_s": [2.0, 1.0, 4.0]})
    row = rows.row("m", "s", ours=ours, ours_label="ours", peer=peer, peer_label="jax2tf")
    assert row["paired"]["ours/peer"]["median"] == 0.75  # ratios 0.5, 2.0, 0.75
    assert row["ratios"]["ours/peer"] == 2.0  # the ratio of medians differs
    (check,) = targets.evaluate([rows.section("g", "G", "", [row])])
    assert check["value"] == 0.75 and check["met"]


def test_clocked_rounds_alternate_or_keep_the_order_and_pair_round_by_round():
    """The wall/CPU rounds of save_time and serving_gap: every candidate once per round, the
    order changing by `round_orders` or kept, and ratios paired by round."""
    calls = []
    candidates = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    samples = harness.clocked_rounds(candidates, 4, warmup=1)
    assert calls[:2] == ["a", "b"]  # the warm-up, in the order given
    assert [calls[2 + 2 * i:4 + 2 * i] for i in range(4)] == harness.round_orders(["a", "b"], 4)
    assert {clock: {k: len(v) for k, v in s.items()} for clock, s in samples.items()} == {
        "wall": {"a": 4, "b": 4}, "cpu": {"a": 4, "b": 4}}
    calls.clear()
    harness.clocked_rounds(candidates, 3, alternate=False)
    assert calls == ["a", "b"] * 3
    assert harness.paired_ratios([3.0, 1.0, 4.0], [1.0, 2.0, 2.0]) == [0.5, 2.0, 3.0]
    assert harness.spread([4.0, 1.0, 3.0, 2.0]) == {"median": 2.5, "p10": 1.0, "p90": 4.0,
                                                    "n": 4}
    load = harness.LoadRecord()
    assert load.finish()["start"] == load.start >= 0 and load.minutes >= 0


def test_a_focused_run_writes_its_own_files_not_latest(written, tmp_path):
    result, _ = written
    paths = run.write(result, tmp_path, plot=False, name="conversion_focused")
    assert {p.name for p in paths.values()} == {"conversion_focused.json",
                                                "conversion_focused.md"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conversion_focused.json",
                                                          "conversion_focused.md"]
    assert json.loads(paths["json"].read_text()) == json.loads(json.dumps(result))
