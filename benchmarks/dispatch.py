"""Tiny-function dispatch: `sin(x) * 2` on 16 floats, eager and tf.function.

Issue target: a cached eager call of ours <= 1.5x our tf.function call. The peer re-exports on
every eager call. Run: `python -m benchmarks.dispatch [--rounds N]`.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import harness, rows  # noqa: E402


def tiny(x):
    return jnp.sin(x) * 2


def run(rounds: int = 200) -> dict:
    x_np = np.linspace(0, 1, 16, dtype=np.float32)
    x_tf = tf.constant(x_np)
    ours = jax2tf_native.convert(tiny)
    ours_fn = tf.function(ours, autograph=False)
    peer = jax2tf.convert(tiny)
    peer_fn = tf.function(peer, autograph=False)
    jitted = jax.jit(tiny)
    x_jax = jnp.asarray(x_np)
    expected = np.asarray(jitted(x_jax))
    for fn in (ours, ours_fn, peer, peer_fn):
        np.testing.assert_allclose(fn(x_tf).numpy(), expected, rtol=1e-6)
    candidates = {
        "jax.jit": lambda: jitted(x_jax).block_until_ready(),
        "ours eager": lambda: ours(x_tf),
        "ours tf.function": lambda: ours_fn(x_tf),
        "peer eager": lambda: peer(x_tf),
        "peer tf.function": lambda: peer_fn(x_tf),
    }
    # The peer's eager path re-exports each call (milliseconds): fewer rounds keep the run short.
    stats = harness.interleaved(candidates, rounds=rounds)
    ratio = lambda a, b: stats[a]["median_s"] / stats[b]["median_s"]
    ratios = {
        "ours eager / ours tf.function": ratio("ours eager", "ours tf.function"),
        "peer eager / peer tf.function": ratio("peer eager", "peer tf.function"),
        "ours eager / peer eager": ratio("ours eager", "peer eager"),
        "ours tf.function / peer tf.function": ratio("ours tf.function", "peer tf.function"),
    }
    return {"environment": harness.environment(), "rounds": rounds, "stats": stats,
            "ratios": ratios, "target": {"ours eager / ours tf.function": 1.5}}


def section(result: dict) -> dict:
    """`run`'s result as a `rows.section` for the combined report (benchmarks.run)."""
    stats = {k: rows.from_harness(v) for k, v in result["stats"].items()}
    out = [rows.row("tiny sin(x)*2", mode, jax=stats["jax.jit"], jax_label="jax.jit",
                    peer=stats[f"peer {mode}"], peer_label=f"jax2tf {mode}",
                    ours=stats[f"ours {mode}"], ours_label=f"ours {mode}")
           for mode in ("eager", "tf.function")]
    description = (
        "A cached call of `sin(x) * 2` on 16 float32 (per-call overhead). jax2tf's eager path "
        "re-exports on every call. Target: ours eager <= 1.5x ours tf.function.")
    return rows.section("dispatch", "Tiny-function dispatch", description, out,
                        {"rounds": result["rounds"], "ratios": result["ratios"]})


def markdown(result: dict) -> str:
    stats, ratios = result["stats"], result["ratios"]
    env = result["environment"]
    lines = [
        "# Tiny-function dispatch: `sin(x) * 2`, 16 x float32",
        "",
        f"jax {env['jax']}, tensorflow {env['tensorflow']}, {env['cpus']} CPUs; "
        f"{result['rounds']} interleaved rounds, median (p10-p90).",
        "",
        "| candidate | per call |",
        "|---|---|",
    ]
    for name, s in stats.items():
        lines.append(f"| {name} | {harness.fmt_us(s['median_s'])} "
                     f"({harness.fmt_us(s['p10_s'])}-{harness.fmt_us(s['p90_s'])}) |")
    lines += ["", "| ratio | value |", "|---|---|"]
    for name, value in ratios.items():
        lines.append(f"| {name} | {value:.2f} |")
    target = result["target"]["ours eager / ours tf.function"]
    met = ratios["ours eager / ours tf.function"] <= target
    lines += ["", f"Target: ours eager / ours tf.function <= {target}: "
                  f"{'met' if met else 'NOT met'}.", ""]
    return "\n".join(lines)


def main() -> None:
    harness.rounds_main("dispatch", run, markdown, rounds=200, description=__doc__)


if __name__ == "__main__":
    main()
