"""ms/call of the example CNN exported with saved_model_tools.save_tfjs, run in Node with
@tensorflow/tfjs 4.22 (pure JS CPU backend; `npm ci --prefix tests/tfjs`), beside the same
plain-ops graph in TF (tf.function) and JAX's jit, on this machine, one run.

    python -m benchmarks.tfjs_node [--out benchmarks/results/tfjs_node.md]
"""
from __future__ import annotations

import argparse
import platform
import tempfile

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
import saved_model_tools
from benchmarks import harness
from jax2tf_native import example_model
from tools import tfjs_runtimes

BATCHES = (1, 32)
REPEATS = 20
ROUNDS = 3


def _ms(fn, repeats=REPEATS):
    return harness.seconds_per_call(fn, repeats, warmup=1) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results/tfjs_node.md")
    args = parser.parse_args()
    params = example_model.init_params()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        saved_model_tools.save_tfjs(f"{tmp}/js", example_model.apply, params,
                                    [example_model.example_images(2)],
                                    polymorphic_shapes=[example_model.POLYMORPHIC_SHAPE])
        plain = tf.function(jax2tf_native.convert(
            example_model.apply, polymorphic_shapes=[None, example_model.POLYMORPHIC_SHAPE],
            enable_xla=False), autograph=False)
        jitted = jax.jit(example_model.apply)
        for batch in BATCHES:
            x = example_model.example_images(batch)
            want = np.asarray(jitted(params, x))
            timings = {"node": [], "tf": [], "jax": []}
            errors = []

            def node():
                (got,), ms = tfjs_runtimes.run_in_node(f"{tmp}/js", {"input_0": x},
                                                       repeat=REPEATS)
                errors.append(float(np.max(np.abs(got - want))))
                timings["node"].append(ms)

            def tf_plain():
                timings["tf"].append(_ms(lambda: plain(params, x).numpy()))

            def jax_jit():
                timings["jax"].append(_ms(lambda: jitted(params, x).block_until_ready()))

            order = [node, tf_plain, jax_jit]
            for round_index in range(ROUNDS):   # side by side, order reversed every round
                for candidate in (order if round_index % 2 == 0 else order[::-1]):
                    candidate()
            rows.append((batch, *(float(np.median(timings[k])) for k in ("node", "tf", "jax")),
                         max(errors)))
    lines = [
        "# Example CNN in TF.js (Node, @tensorflow/tfjs 4.22 CPU backend)",
        "",
        f"`python -m benchmarks.tfjs_node`, one run, {platform.node() and 'shared 2-core dev box'}"
        f" ({platform.machine()}), median of {ROUNDS} rounds (order reversed each round) of "
        f"{REPEATS} timed calls after one warm-up; the machine is shared and noisy: ratios are "
        "rough.",
        "",
        "| batch | TF.js in Node ms/call | TF plain graph (tf.function) ms/call | JAX jit ms/call "
        "| max abs diff TF.js vs JAX |",
        "|---|---|---|---|---|",
    ] + [f"| {b} | {n:.2f} | {t:.2f} | {j:.3f} | {e:.1e} |" for b, n, t, j, e in rows] + [
        "",
        "TF.js's pure-JS CPU backend is the slowest runtime here (no SIMD, no threads); in a "
        "browser `tf.setBackend('webgl')` or the WASM backend, and in Node `@tensorflow/tfjs-node`"
        " (native TF), are the fast paths (not measured: no GPU, and tfjs-node downloads a "
        "native library at install).",
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
