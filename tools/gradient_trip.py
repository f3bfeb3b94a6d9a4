"""Measures how a converted call's trip moves through our modules (issue 16, point 3).

Three trips per entry point (`convert`, `call_exported`): the first eager call under a
`tf.GradientTape` with its `tape.gradient` (exports made on the way), the same call again
(exports cached: only the call path), and tracing a `tf.function` that takes the gradient. Python's profiler hook sees every call between our modules
(`jax2tf_native/`, `tf_ops/`); per trip it reports:

- stays: the trip as a timeline of "which of our modules runs now" (the innermost frame of ours,
  changing at each call and return between modules); a stay is one run of that timeline in one
  module, so going down three layers and back up is 5 stays, and every back-and-forth between
  two modules adds two (the issue's measure: "30 stays in 10 modules");
- re-entries: calls into a module that already has a frame lower on our stack (a lower layer
  calling back up);
- per module, its number of stays.

Run: `python tools/gradient_trip.py` (prints one table per trip and per entry point).
"""
from __future__ import annotations

import collections
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = (os.path.join(_ROOT, "jax2tf_native") + os.sep, os.path.join(_ROOT, "tf_ops") + os.sep)


def _module(frame) -> str | None:
    path = frame.f_code.co_filename
    for package in _PACKAGES:
        if path.startswith(package):
            return os.path.relpath(path, _ROOT)
    return None


def trip(run) -> dict:
    """Runs `run()` under the profiler; returns stays, re-entries and per-module stays."""
    entries: collections.Counter = collections.Counter()
    reentries = 0
    current = [None]

    def innermost(frame):
        while frame is not None:
            m = _module(frame)
            if m is not None:
                return m
            frame = frame.f_back
        return None

    def profile(frame, event, arg):
        nonlocal reentries
        if event not in ("call", "return"):
            return
        now = innermost(frame if event == "call" else frame.f_back)
        if now is not None and now != current[0]:
            entries[now] += 1
        current[0] = now
        if event == "call" and now is not None:
            below = frame.f_back
            stack = []
            while below is not None:
                m = _module(below)
                if m is not None:
                    stack.append(m)
                below = below.f_back
            if stack and stack[0] != now and now in stack:
                reentries += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return {"entries": sum(entries.values()), "reentries": reentries,
            "modules": len(entries), "per_module": dict(entries.most_common())}


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def main() -> None:
    w = tf.Variable(np.ones((3, 2), np.float32))
    x = tf.constant(np.ones((4, 3), np.float32))
    import jax
    exported = jax.export.export(jax.jit(_loss))(
        jax.ShapeDtypeStruct((3, 2), np.float32), jax.ShapeDtypeStruct((4, 3), np.float32))
    entries = {
        "convert": jax2tf_native.convert(_loss),
        "call_exported": jax2tf_native.call_exported(exported.serialize(vjp_order=1)),
    }
    for name, f in entries.items():
        def eager():
            with tf.GradientTape() as tape:
                y = f(w, x)
            return tape.gradient(y, w)

        @tf.function(autograph=False)
        def graph():
            with tf.GradientTape() as tape:
                y = f(w, x)
            return tape.gradient(y, w)

        for label, run in (("first eager call + tape.gradient (exports)", eager),
                           ("eager call + tape.gradient", eager),
                           ("tf.function gradient (trace)", graph)):
            if label.startswith("first"):
                measured = trip(run)
            elif label.startswith("tf.function"):
                run()  # warm-up: exports made and cached
                graph_fn = tf.function(graph.python_function, autograph=False)
                measured = trip(lambda: graph_fn.get_concrete_function())
            else:
                measured = trip(run)
            print(f"{name}: {label}: {measured['entries']} stays in {measured['modules']} "
                  f"modules, {measured['reentries']} re-entries")
            for module, count in measured["per_module"].items():
                print(f"    {count:3d}  {module}")


if __name__ == "__main__":
    main()
