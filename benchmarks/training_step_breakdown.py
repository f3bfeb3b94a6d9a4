"""Where a training step's time goes in a `tf.function` without `jit_compile`, vs JAX.

The step of `benchmarks.training_step` (tape through our converted loss, default options) is
taken apart into its two XlaCallModule ops, each timed alone, and the same two exported modules
are run by JAX's own runtime, so that each difference has one cause:

- `jax value_and_grad`: the target's baseline, one XLA program;
- `jax loss`: JAX's forward alone;
- `jax fwd+bwd (our exports)`: our residual forward and backward exports, run by `jax.jit`
  one after the other: the cost of two programs and materialized residuals, without TF;
- `tf step`: ours, as the benchmark runs it (forward and backward ops marked as one XLA
  cluster, `tf_ops.gradient_ops.one_xla_cluster`); `tf step (two programs)`: without that
  mark, each op its own XLA program; `tf step (two programs, all residuals)`: that, with
  every residual of the pullback returned (before unread residuals were dropped);
- `tf fwd op`, `tf bwd op`: each XlaCallModule op alone in a `tf.function` (residuals fixed);
- `tf fwd op + bwd op (no tape)`: both ops in one `tf.function`, no tape, no custom gradient:
  the step minus TF's gradient bookkeeping;
- `tf plain op`: the inference module (no residuals), for the residual outputs' cost;
- `tf step jit_compile`: the whole step as one XLA cluster.

One process; candidates interleaved in an order that changes every round; per-round ratios to
`jax value_and_grad` (median and p10-p90 over rounds). Run:
`python -m benchmarks.training_step_breakdown [--workload "cnn b64"] [--rounds 100] [--write]`;
`--write` writes results/training_step_breakdown_run.{json,md}; results/training_step_breakdown.md
reads them (what was tried, and why).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import harness, training_step  # noqa: E402
from jax2tf_native import gradients, prepared_export, vjp_functions  # noqa: E402
from tf_ops import gradient_ops  # noqa: E402


def _converted_step(loss, variables, args, jit_compile, before: int = 0):
    """The benchmark's step, traced on `args`, and the node its converted loss runs.

    `before`: 0, as the library does now; 1, the forward and backward ops left as two XLA
    programs (before `gradient_ops.one_xla_cluster`); 2, that and every residual of the
    pullback returned (before unread residuals were dropped)."""
    seen = []
    real_call, real_read = gradients.call, vjp_functions._residuals_read
    real_cluster = gradient_ops.one_xla_cluster

    def spy(node, values, *args, **kwargs):
        seen.append(node)
        return real_call(node, values, *args, **kwargs)

    gradients.call = spy
    if before >= 1:
        gradient_ops.one_xla_cluster = contextlib.nullcontext
    if before >= 2:
        vjp_functions._residuals_read = lambda tree, residuals, cts: [True] * len(residuals)
    try:
        step = training_step._tf_step(jax2tf_native.convert(loss), variables, jit_compile)
        step(*args)
        return step, seen[0]
    finally:
        gradients.call, vjp_functions._residuals_read = real_call, real_read
        gradient_ops.one_xla_cluster = real_cluster


def candidates_for(name: str) -> tuple[dict, dict]:
    make_params, loss, make_batch = training_step.WORKLOADS[name]
    params = make_params()
    x, labels = make_batch()
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x_tf, labels_tf = tf.constant(x), tf.constant(labels)
    params_jax = jax.tree.map(jnp.asarray, params)
    x_jax, labels_jax = jnp.asarray(x), jnp.asarray(labels)
    jax_step, jax_loss = jax.jit(jax.value_and_grad(loss)), jax.jit(loss)

    args = (x_tf, labels_tf)
    step, node = _converted_step(loss, variables, args, False)
    step_two, _ = _converted_step(loss, variables, args, False, before=1)
    step_all, node_all = _converted_step(loss, variables, args, False, before=2)
    step_jit, _ = _converted_step(loss, variables, args, True)

    watched = tuple(range(len(params)))  # the tape watches the variables, argument 0
    variant = node.forward_plan(watched).node
    forward, backward = variant.forward(), variant.backward()
    n_out = forward.n_outputs
    flat_vars = [variables[k] for k in sorted(params)]

    def flat_tf():
        return [tf.convert_to_tensor(v) for v in flat_vars] + [x_tf, labels_tf]

    @tf.function(autograph=False)
    def tf_fwd():
        return prepared_export.call_flat(forward.prepared, flat_tf())

    @tf.function(autograph=False)
    def tf_plain():
        return prepared_export.call_flat(node.primal(), flat_tf())

    outs = tf_fwd()
    residuals = [tf.identity(r) for r in forward.structure.residuals(flat_tf(), outs[n_out:])]
    ones = tf.ones_like(outs[0])

    @tf.function(autograph=False)
    def tf_bwd():
        return prepared_export.call_flat(backward, residuals + [ones])

    @tf.function(autograph=False)
    def tf_fwd_bwd():
        xs = flat_tf()
        o = prepared_export.call_flat(forward.prepared, xs)
        res = forward.structure.residuals(xs, o[n_out:])
        return o[0], prepared_export.call_flat(backward, res + [tf.ones_like(o[0])])

    jax_fwd = jax.jit(lambda *a: forward.prepared.exported.call(*a))
    jax_bwd = jax.jit(lambda *a: backward.exported.call(*a))
    flat_jax = [params_jax[k] for k in sorted(params)] + [x_jax, labels_jax]

    def jax_split():
        o = jax_fwd(*flat_jax)
        res = forward.structure.residuals(flat_jax, o[n_out:])
        return jax.block_until_ready((o[0], jax_bwd(*res, jnp.ones_like(o[0]))))

    tf_grads = lambda out: [g.numpy() for g in out[1].values()]
    sync = jax.block_until_ready
    candidates = {
        "jax value_and_grad": lambda: sync(jax_step(params_jax, x_jax, labels_jax)),
        "jax loss": lambda: sync(jax_loss(params_jax, x_jax, labels_jax)),
        "jax fwd+bwd (our exports)": jax_split,
        "tf step": lambda: tf_grads(step(x_tf, labels_tf)),
        "tf step (two programs)": lambda: tf_grads(step_two(x_tf, labels_tf)),
        "tf step (two programs, all residuals)": lambda: tf_grads(step_all(x_tf, labels_tf)),
        "tf fwd op": lambda: [t.numpy() for t in tf_fwd()],
        "tf bwd op": lambda: [t.numpy() for t in tf_bwd()],
        "tf fwd op + bwd op (no tape)": lambda: [t.numpy() for t in tf_fwd_bwd()[1]],
        "tf plain op": lambda: tf_plain()[0].numpy(),
        "tf step jit_compile": lambda: tf_grads(step_jit(x_tf, labels_tf)),
    }
    all_forward = node_all.forward_plan(watched).node.forward()
    describe = lambda f: [f"{tuple(a.shape)} {a.dtype}"
                          for a in f.prepared.exported.out_avals[f.n_outputs:]]
    info = {"residual outputs": describe(forward),
            "residual outputs (all residuals)": describe(all_forward),
            "backward inputs": len(backward.exported.in_avals)}
    return candidates, info


def run(name: str, rounds: int, calls: int) -> dict:
    candidates, info = candidates_for(name)
    stats = harness.interleaved(candidates, rounds=rounds, calls_per_round=calls, settle=1)
    base = stats["jax value_and_grad"]["samples_s"]
    table = {}
    for label, s in stats.items():
        ratios = sorted(a / b for a, b in zip(s["samples_s"], base))
        pick = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]
        table[label] = {"median_ms": s["median_s"] * 1e3, "p10_ms": s["p10_s"] * 1e3,
                        "ratio_median": statistics.median(ratios), "ratio_p10": pick(0.1),
                        "ratio_p90": pick(0.9)}
    return {"environment": harness.environment(), "workload": name, "rounds": rounds,
            "calls_per_round": calls, "info": info, "candidates": table}


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"## {result['workload']}: {result['rounds']} rounds x {result['calls_per_round']} "
             f"calls (load average at the end {env['load_average'][0]:.1f})", "",
             "| candidate | median | p10 | / jax value_and_grad, per round (p10-p90) |",
             "|---|---:|---:|---:|"]
    for label, c in result["candidates"].items():
        lines.append(f"| {label} | {c['median_ms']:.3f} ms | {c['p10_ms']:.3f} ms | "
                     f"{c['ratio_median']:.3f} ({c['ratio_p10']:.2f}-{c['ratio_p90']:.2f}) |")
    info = result["info"]
    lines += ["", f"Residual outputs of the forward op: {len(info['residual outputs'])} "
              f"({', '.join(info['residual outputs'])}); with every residual: "
              f"{len(info['residual outputs (all residuals)'])}. Backward op inputs: "
              f"{info['backward inputs']}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", action="append", choices=list(training_step.WORKLOADS),
                        help="repeatable; default: cnn b64")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--write", action="store_true",
                        help="write results/training_step_breakdown_run.{json,md}")
    args = parser.parse_args()
    results = [run(name, args.rounds, args.calls) for name in args.workload or ["cnn b64"]]
    text = "\n".join(markdown(r) for r in results)
    print(text)
    if args.write:
        harness.write_results("training_step_breakdown_run", {"runs": results}, text)


if __name__ == "__main__":
    main()
