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
  teardown error counts as failed; the message is the error's last line).
"""
from __future__ import annotations

import json
import os

import jax.experimental.jax2tf as jax2tf_package

_OUTCOMES: dict[str, dict] = {}

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


def pytest_runtest_logreport(report):
    previous = _OUTCOMES.get(report.nodeid)
    if report.when == "call" or report.outcome != "passed":
        if previous is None or previous["outcome"] == "passed":
            _OUTCOMES[report.nodeid] = {
                "outcome": "failed" if report.outcome == "failed" else report.outcome,
                "message": "" if report.outcome == "passed" else _message(report)}


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
