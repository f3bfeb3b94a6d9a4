"""Conversion time: convert -> first result, with a fresh function every time.

Each call builds a new Python function whose result adds a constant unique to that call, so
every cache misses everywhere (JAX's trace and compile caches, our export cache, TF's eager
kernel and XLA compilation caches, which key on the module bytes): what a user pays the first
time. JAX's counterpart is `jax.jit(f)(args)` (trace, lower, compile, run). Target: ours <= 1.05x
the peer's. Run alone: `python -m benchmarks.conversion [--rounds N]`.
"""
from __future__ import annotations

import argparse
import itertools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import forward, harness, rows  # noqa: E402

MODELS = ("mlp", "cnn", "transformer")
BATCH = 1


def _fresh(apply_fn, counter):
    offset = np.float32(next(counter))

    def fresh_model(params, x):
        return apply_fn(params, x) + offset
    return fresh_model


def candidates_for(model: str) -> dict:
    """{label: zero-argument callable converting a fresh function and computing its result}."""
    make_params, apply_fn, make_input = forward.MODELS[model]
    params = make_params()
    x = make_input(BATCH)
    params_jax = jax.tree.map(jax.numpy.asarray, params)
    x_jax = jax.numpy.asarray(x)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x_tf = tf.constant(x)
    counter = itertools.count(1)
    fresh = lambda: _fresh(apply_fn, counter)
    graph = lambda converted: tf.function(converted, autograph=False)
    return {
        "jax.jit": lambda: jax.jit(fresh())(params_jax, x_jax).block_until_ready(),
        "jax2tf eager": lambda: jax2tf.convert(fresh())(variables, x_tf).numpy(),
        "ours eager": lambda: jax2tf_native.convert(fresh())(variables, x_tf).numpy(),
        "ours recompute eager": lambda: jax2tf_native.convert(
            fresh(), gradient_mode="recompute")(variables, x_tf).numpy(),
        "jax2tf tf.function": lambda: graph(jax2tf.convert(fresh()))(variables, x_tf).numpy(),
        "ours tf.function": lambda: graph(jax2tf_native.convert(fresh()))(variables, x_tf).numpy(),
        "ours recompute tf.function": lambda: graph(jax2tf_native.convert(
            fresh(), gradient_mode="recompute"))(variables, x_tf).numpy(),
    }


def run(rounds: int = 5) -> dict:
    """Measures every model; returns a `rows.section`."""
    out = []
    for model in MODELS:
        # One warmup call: first-use costs of the libraries themselves are not conversion time.
        stats = {k: rows.from_harness(v) for k, v in harness.interleaved(
            candidates_for(model), rounds=rounds, warmup=1).items()}
        for mode in ("eager", "tf.function"):
            for variant, label in (("ours", "ours (default)"),
                                   ("ours recompute", "ours (recompute)")):
                out.append(rows.row(f"{model} b{BATCH}", mode, jax=stats["jax.jit"],
                                    jax_label="jax.jit first call",
                                    peer=stats[f"jax2tf {mode}"], peer_label=f"jax2tf {mode}",
                                    ours=stats[f"{variant} {mode}"], ours_label=label))
    description = (
        "Seconds from a fresh JAX function to its first result: convert (+ tf.function trace) "
        "+ export + XLA compile + run; JAX: jax.jit trace + compile + run. Each call uses a new "
        "function with a unique constant, so no cache hits. Ours with default options (no tape "
        "records: only the primal module is exported and compiled, as jax2tf does) and with "
        "gradient_mode='recompute'. Target: ours <= 1.05x jax2tf.")
    return rows.section("conversion", "Conversion time (first result)", description, out,
                        {"rounds": rounds})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from benchmarks import report
    print(report.section_markdown(run(args.rounds)))


if __name__ == "__main__":
    main()
