"""pytest plugin for tools/peer_suite.py: the peer's own tests, with ours in jax2tf's place.

Loaded with `-p peer_suite_plugin` (tools/ on PYTHONPATH) in each child pytest that
tools/peer_suite.py starts; configured by environment variables:

- PEER_SUITE_CONVERT: "peer" leaves `jax.experimental.jax2tf` as installed; "ours" sets
  `jax.experimental.jax2tf.convert = jax2tf_native.convert` before any test module is imported.
  That one attribute is what the tests (`jax2tf.convert(...)`), Keras and orbax-export call.
  Nothing else is replaced: `call_tf`, `PolyShape`, `DisabledSafetyCheck`, `dtype_of_val`
  and `eval_polymorphic_shape` are the peer's own objects in both runs, as
  `jax2tf_native` re-exports them (docs/compat.md, "Other public names"); the peer's
  internal module `jax.experimental.jax2tf.jax2tf` keeps its own `convert` (only its own code
  and a test helper, cross_compilation_check.py, reach it there).
- PEER_SUITE_JAX_TREE: a JAX source tree; its `jax/experimental/jax2tf` directory is added to
  the installed package's `__path__`, so that `jax.experimental.jax2tf.tests` (not in the
  wheel) imports from the tree while everything else comes from the installed JAX.
- PEER_SUITE_OUTCOMES: the JSON file this plugin writes when the session ends:
  {nodeid: {"outcome": "passed" | "failed" | "skipped", "message": "..."}} (a setup or
  teardown error counts as failed; the message is the error's last line). As the run goes,
  the same outcomes are appended to PEER_SUITE_OUTCOMES + ".jsonl", one line per test, with a
  {"started": nodeid} line before each test: what a run that crashed or hung leaves behind
  (tools/peer_suite.py then names the test it died in and runs the rest in a fresh process).
- PEER_SUITE_SKIP (optional): a JSON file holding a list of node ids to leave out (those a
  previous process of the same run already ran).
"""
from __future__ import annotations

import json
import os

import jax.experimental.jax2tf as jax2tf_package

_OUTCOMES: dict[str, dict] = {}
_JOURNAL = (open(os.environ["PEER_SUITE_OUTCOMES"] + ".jsonl", "a", buffering=1)
            if os.environ.get("PEER_SUITE_OUTCOMES") else None)


def _journal(entry: dict) -> None:
    if _JOURNAL is not None:
        _JOURNAL.write(json.dumps(entry) + "\n")   # line-buffered: on disk before the next test

if os.environ.get("PEER_SUITE_JAX_TREE"):
    jax2tf_package.__path__.append(os.path.join(
        os.environ["PEER_SUITE_JAX_TREE"], "jax", "experimental", "jax2tf"))

if os.environ.get("PEER_SUITE_CONVERT") == "ours":
    import jax2tf_native

    jax2tf_package.convert = jax2tf_native.convert
elif os.environ.get("PEER_SUITE_CONVERT") != "peer":
    raise RuntimeError("PEER_SUITE_CONVERT must be 'peer' or 'ours'")


def _message(report) -> str:
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])[:500]
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return " ".join(text.split())[:1000]


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PEER_SUITE_SKIP"):
        return
    with open(os.environ["PEER_SUITE_SKIP"]) as f:
        done = set(json.load(f))
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid in done])
    items[:] = [i for i in items if i.nodeid not in done]


def pytest_runtest_logstart(nodeid, location):
    _journal({"started": nodeid})


def pytest_runtest_logreport(report):
    previous = _OUTCOMES.get(report.nodeid)
    if report.when == "call" or report.outcome != "passed":
        if previous is None or previous["outcome"] == "passed":
            _OUTCOMES[report.nodeid] = {
                "outcome": "failed" if report.outcome == "failed" else report.outcome,
                "message": "" if report.outcome == "passed" else _message(report)}
    if report.when == "teardown":
        _journal({"nodeid": report.nodeid, **_OUTCOMES.get(report.nodeid, {
            "outcome": "failed", "message": "no outcome recorded"})})


def pytest_collectreport(report):
    if report.failed:   # a test module that does not import: its tests never run
        where = report.nodeid or str(getattr(report, "fspath", "") or "session")
        _OUTCOMES[f"{where}::<collection>"] = {"outcome": "failed",
                                              "message": _message(report)}


def pytest_sessionfinish(session):
    path = os.environ.get("PEER_SUITE_OUTCOMES")
    if path:
        with open(path, "w") as f:
            json.dump({"exitstatus": int(session.exitstatus), "outcomes": _OUTCOMES}, f,
                      indent=1, sort_keys=True)
