"""The peer's own test suites, run as installed and with our `convert` in its place (issue 37).

Four suites, each run twice in child pytest processes (niced, bounded, restarted past a
crash or a hang), once with the peer's
`jax.experimental.jax2tf.convert` and once with `jax2tf_native.convert` in its place
(tools/peer_suite_plugin.py says exactly what is replaced: that one attribute):

  jax2tf            JAX's jax2tf tests at the installed JAX's tag (default subset: the tree's
                    own pytest configuration, JAX_NUM_GENERATED_CASES unset, no x64). They are
                    not in the jax wheel; pass a JAX source tree at that tag:
                      git clone --depth 1 --branch jax-v0.10.2 https://github.com/jax-ml/jax.git
  keras-jax         Keras's own export tests as the keras wheel ships them (KERAS_BACKEND=jax:
                    `model.export`, `ExportArchive`, `TFSMLayer` call jax2tf.convert)
  keras-tensorflow  Keras's `JaxLayer` / `FlaxLayer` tests (KERAS_BACKEND=tensorflow)
  orbax-export      orbax-export's own tests of its JAX -> TF export, as its wheel ships them

Then every test the peer passes and ours fails is either a deliberate difference (DELIBERATE
below: the docs/compat.md section that explains it) or a bug to fix; the results, with the
counts and both lists, go to tools/results/peer_suite.md and .json.

    python -m tools.peer_suite --jax-source ~/src/jax            # all suites, both sides
    python -m tools.peer_suite --jax-source ~/src/jax --suites jax2tf --sides ours

A side's outcomes are also kept in --work (default /tmp/peer_suite): `--reuse` takes a side
from there instead of running it again (e.g. re-run only ours after a fix). The run is long
(tens of minutes per side on 2 cores), which is why it is a tool and not a CI test; the
behaviours it found are pinned by cheap tests in our own suite
(tests/jax2tf_native/test_peer_exceptions.py,
tests/jax2tf_native/test_jax_internals.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import child_runner

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "tools" / "results"
SIDES = ("peer", "ours")


@dataclasses.dataclass(frozen=True)
class Suite:
    """One suite: where its tests are and how pytest runs them."""
    name: str
    env: dict
    what: str

    def paths(self, jax_tree: Path | None, files: list[str] | None = None) -> list[Path]:
        if self.name == "jax2tf":
            tests = jax_tree / "jax" / "experimental" / "jax2tf" / "tests"
            return [tests / f for f in files] if files else [tests]
        keras = _package_dir("keras") / "src"
        orbax = _package_dir("orbax.export")
        return {
            "keras-jax": [keras / "export" / "saved_model_test.py",
                          keras / "export" / "tfsm_layer_test.py"],
            "keras-tensorflow": [keras / "utils" / "jax_layer_test.py"],
            "orbax-export": [orbax / "jax_module_test.py", orbax / "export_manager_test.py",
                             orbax / "tensorflow_export_test.py",
                             orbax / "modules" / "tensorflow_module_test.py",
                             orbax / "validate" / "validation_job_test.py",
                             orbax / "validate" / "validation_manager_test.py"],
        }[self.name]


SUITES = {s.name: s for s in (
    Suite("jax2tf", {}, "JAX's jax/experimental/jax2tf/tests (default subset)"),
    Suite("keras-jax", {"KERAS_BACKEND": "jax"}, "Keras's export tests, JAX backend"),
    Suite("keras-tensorflow", {"KERAS_BACKEND": "tensorflow"},
          "Keras's JaxLayer/FlaxLayer tests, TF backend"),
    Suite("orbax-export", {}, "orbax-export's JAX -> TF export tests"),
)}

# Tests the peer passes and ours fails on purpose: (suite, nodeid regex) -> (the docs/compat.md
# section that explains it, why).
DELIBERATE: dict[tuple[str, str], tuple[str, str]] = {
    ("jax2tf", r"jax2tf_test\.py::Jax2TfTest::test_native_serialization_grad$"): (
        "jax2tf's README recipes",
        "it counts 2 XlaCallModule ops in the graph of a tape gradient of a TPU-only module; "
        "ours has 4: the forward and the backward module (Migrating in five minutes, "
        "Gradients), each preceded by our platform guard, a tiny module asking which platform "
        "runs the graph, so that the call fails with our message and fix (in a graph from a "
        "TF assert op, an InvalidArgumentError, where the peer's op raises NotFoundError; "
        "tests/jax2tf_native/test_peer_exceptions.py::"
        "test_tape_gradient_of_a_module_for_other_platforms_deliberately_has_guard_modules)"),
    ("jax2tf", r"shape_poly_test\.py::ShapePolyTest::test_(simple_binary|with_custom_vjp)$"): (
        "Static output shapes",
        "it asserts the None output dimensions of jax2tf's XlaCallModule op in a tf.function "
        "traced at inputs more specific than polymorphic_shapes; ours gives the outputs the "
        "static sizes the module computes for them ((2, 3) for (2, None); tests/jax2tf_native/"
        "test_peer_exceptions.py::"
        "test_graph_outputs_deliberately_get_the_static_sizes_of_static_inputs)"),
    ("jax2tf", r"call_tf_test\.py::RoundTripToTfTest::"
               r"test_shape_poly_error_no_output_shape_dtype_with_jit=(True|False)$"): (
        "call_tf inside converted functions",
        "it expects the peer's refusal of a call_tf whose result has a dynamic shape; ours "
        "runs it (the function is split at the call, "
        "tests/jax2tf_native/test_call_tf_polymorphic.py)"),
}


# Tests whose outcomes on both sides the results keep by name: the ones ours failed and the
# peer passed before they were fixed (tests/jax2tf_native/test_peer_exceptions.py pins each
# behaviour).
WATCHED: dict[str, tuple[str, ...]] = {
    "jax2tf": (
        r"shape_poly_test\.py::.*::test_arg_avals_errors",
        r"shape_poly_test\.py::.*::test_readme_examples",
        r"shape_poly_test\.py::.*::test_shape_constraints_errors_(2|3|8)_2_6_",
        r"jax2tf_test\.py::.*::test_convert_under_transform_error_non_tracer2$",
        r"jax2tf_test\.py::.*::test_nested_convert_error_non_tracer$",
        r"jax2tf_test\.py::.*::test_input_output_naming$",
        r"call_tf_test\.py::.*::test_without_gradient_saved_model$",
        r"call_tf_test\.py::.*::test_shape_poly_error_mismatch_output_shape_dtype_kind="
        r"bad_dim_with_jit=(True|False)$",
    ),
}


def watched(suite: str, peer: dict, ours: dict) -> dict:
    """{pattern: {nodeid: {"peer": outcome, "ours": outcome}}} for the suite's WATCHED tests."""
    found: dict = {}
    for pattern in WATCHED.get(suite, ()):
        found[pattern] = {
            nodeid: {"peer": peer.get(nodeid, {}).get("outcome", "absent"),
                     "ours": ours.get(nodeid, {}).get("outcome", "absent")}
            for nodeid in sorted(set(peer) | set(ours)) if re.search(pattern, nodeid)}
    return found


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise SystemExit(f"{name} is not installed: its suite cannot run.")
    return Path(list(spec.submodule_search_locations)[0])


def _versions() -> dict:
    code = ("import json, jax, tensorflow, keras; from importlib import metadata; print(json.dumps("
            "{'jax': jax.__version__, 'tensorflow': tensorflow.__version__, 'keras': "
            "keras.__version__, 'orbax-export': metadata.version('orbax-export')}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _commit(root: Path) -> str:
    """The commit a checkout (or a `git archive` of one, with a COMMIT file) holds."""
    if (root / "COMMIT").is_file():
        return (root / "COMMIT").read_text().strip()
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or str(root)


# A test process that records nothing for this long is taken as hung (killed, and the rest
# run in a fresh process); the slowest single test of the four suites takes about a minute.
STALL_S = 900.0
# Fresh processes after a crash or a hang, at most, before the side is given up.
RESTARTS = 5


def run_side(suite: Suite, side: str, jax_tree: Path | None, out: Path, timeout: float,
             ours_root: Path = REPO, files: list[str] | None = None) -> dict:
    """Runs one suite once in a child pytest; returns {"outcomes": ..., "seconds": ...}.

    `ours_root`: the checkout whose jax2tf_native is "ours" (another commit's, for a before /
    after comparison); the plugin always comes from this checkout's tools/. `files`: only these
    test files of the jax2tf suite (default: the whole tests directory).

    A test process that crashes (a signal in a native library) or stalls for `STALL_S` leaves
    its outcomes in the plugin's journal; the tests not yet run go on in a fresh process
    (`RESTARTS` times at most), and the test it died in is run again alone (`run_alone`),
    whose outcome is the one kept, with the death in the result's "died"."""
    config_dir = Path(tempfile.mkdtemp(prefix="peer_suite_"))
    args = ["-p", "peer_suite_plugin", "-p", "no:cacheprovider", "-q",
            "--import-mode=importlib", "--continue-on-collection-errors"]
    if suite.name == "jax2tf" and (jax_tree / "pyproject.toml").is_file():
        rootdir = jax_tree
        args += ["--rootdir", str(jax_tree), "-c", str(jax_tree / "pyproject.toml")]
    else:
        # An empty configuration (not the user's); the rootdir is the tests' own folder, so
        # that test ids name their file (keras/src/export/saved_model_test.py::...).
        (config_dir / "pytest.ini").write_text("[pytest]\n")
        rootdir = _package_dir(suite.name.split("-")[0]).parent
        args += ["--rootdir", str(rootdir), "-c", str(config_dir / "pytest.ini")]
    skip = config_dir / "skip.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (REPO / "tools", ours_root))),
               PEER_SUITE_CONVERT=side, PEER_SUITE_SKIP=str(skip),
               PEER_SUITE_OUTCOMES=str(out), TF_CPP_MIN_LOG_LEVEL="2", **suite.env)
    env.pop("JAX_NUM_GENERATED_CASES", None)
    if suite.name == "jax2tf":
        env["PEER_SUITE_JAX_TREE"] = str(jax_tree)
    # -P and a scratch cwd: the tree's own `jax/` must not shadow the installed JAX.
    base = [sys.executable, "-P", "-m", "pytest", *args]
    command = [*base, *map(str, suite.paths(jax_tree, files))]
    print(f"[{suite.name} / {side}] {' '.join(command)}", flush=True)
    journal = Path(f"{out}.jsonl")
    for stale in (out, journal):
        stale.unlink(missing_ok=True)
    start = time.monotonic()
    outcomes: dict[str, dict] = {}
    died: list[dict] = []
    for attempt in range(RESTARTS + 1):
        skip.write_text(json.dumps(sorted(outcomes)))
        with open(out.with_suffix(".log"), "a" if attempt else "w") as log:
            proc = subprocess.Popen(command, cwd=config_dir, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            child_runner.renice(proc.pid, 5)
            ended = _wait(proc, journal, start + timeout)
        if ended == "timeout":
            raise SystemExit(f"[{suite.name} / {side}] ran past {timeout:.0f} s; see "
                             f"{out.with_suffix('.log')}")
        ran, running = _journal(journal)
        outcomes.update(ran)
        if out.is_file():
            outcomes.update(json.loads(out.read_text())["outcomes"])
            break
        if running is None or running in outcomes:
            raise SystemExit(f"[{suite.name} / {side}] pytest exited {proc.returncode} without "
                             f"results; see {out.with_suffix('.log')}")
        how = (f"hung (nothing recorded for {STALL_S:.0f} s)" if ended == "stalled" else
               f"crashed (exit status {proc.returncode})")
        outcomes[running] = {"outcome": "failed", "message": (
            f"the test process {how} running this test; the tests after it ran in a fresh "
            f"process")}
        died.append({"test": running, "how": how})
        print(f"[{suite.name} / {side}] {how} in {running}; going on in a fresh process",
              flush=True)
    else:
        raise SystemExit(f"[{suite.name} / {side}] died {RESTARTS + 1} times; see "
                         f"{out.with_suffix('.log')}")
    for death in died:  # what the test gives in a process of its own
        alone = run_alone(base, death["test"], rootdir, env, config_dir)
        death["alone"] = alone["outcome"]
        outcomes[death["test"]] = {"outcome": alone["outcome"], "message": (
            f"the test process {death['how']} running this test in the full run (the tests "
            f"after it ran in a fresh process); run alone it {alone['outcome']}"
            + (f": {alone['message']}" if alone.get("message") else ""))}
    result = {"outcomes": outcomes, "died": died, "seconds": round(time.monotonic() - start)}
    out.write_text(json.dumps(result, indent=1, sort_keys=True))
    return result


def run_alone(base: list[str], nodeid: str, rootdir: Path, env: dict,
              config_dir: Path) -> dict:
    """One test in a pytest process of its own (`base`: the side's pytest command without its
    test paths): its {"outcome", "message"}; failed, saying so, if that process dies or
    stalls too."""
    out = config_dir / "alone.json"
    out.unlink(missing_ok=True)
    try:
        subprocess.run([*base, str(rootdir / nodeid)], cwd=config_dir,
                       env=dict(env, PEER_SUITE_OUTCOMES=str(out), PEER_SUITE_SKIP=""),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=STALL_S, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"outcome": "failed", "message": f"it ran past {STALL_S:.0f} s alone too"}
    if not out.is_file():
        return {"outcome": "failed", "message": "its process died alone too"}
    found = json.loads(out.read_text())["outcomes"]
    return found.get(nodeid) or {"outcome": "failed", "message": f"not run alone: {found}"}


def _wait(proc: subprocess.Popen, journal: Path, deadline: float) -> str:
    """Waits for the child: "exited", or "stalled" / "timeout" (then it and what it started are
    killed)."""
    last_change = time.monotonic()
    seen = None
    while True:
        try:
            proc.wait(timeout=min(10.0, STALL_S / 2))
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        mtime = journal.stat().st_mtime if journal.is_file() else None
        if mtime != seen:
            seen, last_change = mtime, time.monotonic()
        now = time.monotonic()
        if now > deadline or now - last_change > STALL_S:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "timeout" if now > deadline else "stalled"


def _journal(path: Path) -> tuple[dict, str | None]:
    """The outcomes a journal holds, and the test started last without one (or None)."""
    outcomes, running = {}, None
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:   # the last line of a process killed mid-write
                continue
            if "started" in entry:
                running = entry["started"]
            else:
                nodeid = entry.pop("nodeid")
                outcomes[nodeid] = entry
                running = None if running == nodeid else running
    return outcomes, running


def counts(outcomes: dict) -> dict:
    found = {"passed": 0, "failed": 0, "skipped": 0}
    for entry in outcomes.values():
        found[entry["outcome"]] += 1
    return found


def deliberate(suite: str, nodeid: str) -> tuple[str, str] | None:
    for (name, pattern), why in DELIBERATE.items():
        if name == suite and re.search(pattern, nodeid):
            return why
    return None


def compare(suite: str, peer: dict, ours: dict) -> dict:
    """The tests whose outcome differs: peer passes and ours fails (deliberate or not), and
    ours passes where the peer fails."""
    worse, better = [], []
    for nodeid in sorted(set(peer) | set(ours)):
        p = peer.get(nodeid, {"outcome": "absent"})["outcome"]
        o = ours.get(nodeid, {"outcome": "absent"})
        if p == "passed" and o["outcome"] != "passed":
            why = deliberate(suite, nodeid)
            worse.append({"test": nodeid, "ours": o["outcome"], "message": o.get("message", ""),
                          "deliberate": list(why) if why else None})
        elif o["outcome"] == "passed" and p not in ("passed", "skipped"):
            better.append({"test": nodeid, "peer": p,
                           "message": peer.get(nodeid, {}).get("message", "")})
    return {"peer_passes_ours_fails": worse, "ours_passes_peer_fails": better}


def _report(results: dict, meta: dict) -> str:
    lines = ["# The peer's own suites with ours in `jax2tf.convert`'s place", "",
             f"Written by `{meta['command']}` on {meta['date']} (load average at the end "
             f"{meta['load']}); {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}.",
             "What is replaced, and how each suite runs: tools/peer_suite.py and "
             "tools/peer_suite_plugin.py."
             + (f" Ours: jax2tf_native at commit {meta['ours']}." if "ours" in meta else ""),
             *([f"The jax2tf suite ran these files of jax/experimental/jax2tf/tests only: "
                f"{', '.join(meta['jax2tf_files'])}."]
               if "jax2tf" in results and meta.get("jax2tf_files", "all") != "all" else []),
             "",
             "| suite | tests | peer: passed / failed / skipped | ours: passed / failed / "
             "skipped | peer passes, ours fails (deliberate) | ours passes, peer fails |",
             "|---|---|---|---|---|---|"]
    for name, r in results.items():
        p, o = r["counts"]["peer"], r["counts"]["ours"]
        worse = r["diff"]["peer_passes_ours_fails"]
        lines.append(
            f"| {name} | {SUITES[name].what} | {p['passed']} / {p['failed']} / {p['skipped']} "
            f"({r['seconds']['peer']} s) | {o['passed']} / {o['failed']} / {o['skipped']} "
            f"({r['seconds']['ours']} s) | {len(worse)} "
            f"({sum(w['deliberate'] is not None for w in worse)}) | "
            f"{len(r['diff']['ours_passes_peer_fails'])} |")
    for name, r in results.items():
        deaths = [(side, d) for side in SIDES for d in r.get("died", {}).get(side, [])]
        if deaths:
            lines += ["", f"## {name}: test processes that died ({len(deaths)})", "",
                      "Each test below ended its process in the full run; the tests after it "
                      "ran in a fresh process, and the test itself was run again alone, whose "
                      "outcome the comparison counts.", ""]
            lines += [f"- {side}: `{d['test']}`: {d['how']}; alone it {d.get('alone', '?')}"
                      for side, d in deaths]
    for name, r in results.items():
        worse = r["diff"]["peer_passes_ours_fails"]
        lines += ["", f"## {name}: the peer passes, ours fails ({len(worse)})", ""]
        if not worse:
            lines.append("None.")
        for w in worse:
            if w["deliberate"]:
                section, why = w["deliberate"]
                lines.append(f"- `{w['test']}`: deliberate, [docs/compat.md, {section}]"
                             f"(../../docs/compat.md): {why}")
            else:
                lines.append(f"- `{w['test']}`: **not deliberate**: {w['message'][:300]}")
        better = r["diff"]["ours_passes_peer_fails"]
        lines += ["", f"## {name}: ours passes, the peer fails ({len(better)})", ""]
        lines += [f"- `{b['test']}` (peer {b['peer']}): {b['message'][:200]}"
                  for b in better[:60]] or ["None."]
        if len(better) > 60:
            lines.append(f"- ... and {len(better) - 60} more (peer_suite.json)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jax-source", type=Path,
                        help="a JAX source tree at the installed JAX's tag (jax2tf suite)")
    parser.add_argument("--suites", nargs="+", choices=list(SUITES), default=list(SUITES))
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "peer_suite")
    parser.add_argument("--reuse", action="store_true",
                        help="take a side's outcomes from --work when they are there")
    parser.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per side")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--name", default="peer_suite",
                        help="the results' file names: NAME.md and NAME.json")
    parser.add_argument("--jax2tf-files", nargs="+", metavar="FILE",
                        help="only these files of jax/experimental/jax2tf/tests (default: all; "
                             "the run's results then say which)")
    parser.add_argument("--ours-root", type=Path, default=REPO,
                        help="the checkout whose jax2tf_native runs as ours (default: this one)")
    args = parser.parse_args(argv)
    if "jax2tf" in args.suites:
        tests = args.jax_source and args.jax_source / "jax/experimental/jax2tf/tests"
        if not tests or not tests.is_dir():
            parser.error("the jax2tf suite needs --jax-source: a JAX source tree at the "
                         "installed version's tag (git clone --depth 1 --branch jax-v0.10.2 "
                         "https://github.com/jax-ml/jax.git)")
    args.work.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in args.suites:
        sides = {}
        for side in SIDES:
            out = args.work / f"{name}.{side}.json"
            if side in args.sides and not (args.reuse and out.is_file()):
                sides[side] = run_side(SUITES[name], side, args.jax_source, out, args.timeout,
                                       args.ours_root.resolve(), args.jax2tf_files)
            elif out.is_file():
                sides[side] = json.loads(out.read_text())
        if set(sides) != set(SIDES):
            print(f"[{name}] only {sorted(sides)} in {args.work}: run the other side, then "
                  f"--reuse to compare", flush=True)
            continue
        results[name] = {
            "counts": {s: counts(sides[s]["outcomes"]) for s in SIDES},
            "seconds": {s: sides[s].get("seconds") for s in SIDES},
            "diff": compare(name, sides["peer"]["outcomes"], sides["ours"]["outcomes"]),
            "died": {s: sides[s].get("died", []) for s in SIDES},
            "watched": watched(name, sides["peer"]["outcomes"], sides["ours"]["outcomes"])}
        print(f"[{name}] {results[name]['counts']}", flush=True)
    meta = {"command": "python -m tools.peer_suite " + " ".join(
                a if not a.startswith("/") else Path(a).name for a in (argv or sys.argv[1:])),
            "date": datetime.date.today().isoformat(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "versions": _versions(),
            "jax2tf_files": args.jax2tf_files or "all"}
    if not results:
        return 0
    args.results.mkdir(parents=True, exist_ok=True)
    if args.ours_root.resolve() != REPO:
        meta["ours"] = _commit(args.ours_root)
    (args.results / f"{args.name}.json").write_text(
        json.dumps({"meta": meta, "suites": results}, indent=1, sort_keys=True) + "\n")
    (args.results / f"{args.name}.md").write_text(_report(results, meta))
    undeliberate = [w for r in results.values() for w in r["diff"]["peer_passes_ours_fails"]
                    if w["deliberate"] is None]
    print(f"wrote {args.results / (args.name + '.md')}; {len(undeliberate)} test(s) the peer "
          f"passes and ours fails without a deliberate reason")
    return 1 if undeliberate else 0


if __name__ == "__main__":
    sys.exit(main())
