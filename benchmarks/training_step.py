"""A training step's gradient: TF tape through our converted loss vs jax.jit(value_and_grad).

Workloads: MLP 512->1024->1024->1024->10 at batch 256; the example CNN (28x28x1) at batch 64;
the transformer block of `benchmarks.transformer` (seq 128, d 256) at batch 8.
Each TF candidate is a tf.function computing (loss, grads w.r.t. tf.Variables); with and
without jit_compile. Targets: ours <= 1.10x JAX (1.05x with jit_compile).
Run: `python -m benchmarks.training_step`.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import harness, models, rows, transformer  # noqa: E402

# name: (parameters, loss(params, x, labels), (x, labels))
WORKLOADS = {
    "mlp b256": (models.mlp_params, models.cross_entropy(models.mlp_apply),
                 lambda: models.mlp_batch(256)),
    "cnn b64": (models.cnn_params, models.cross_entropy(models.cnn_apply),
                lambda: models.cnn_batch(64)),
    "transformer b8": (transformer.params, transformer.loss, lambda: transformer.batch(8)),
}


def _tf_step(converted_loss, variables, jit_compile):
    @tf.function(autograph=False, jit_compile=jit_compile)
    def step(x, labels):
        with tf.GradientTape() as tape:
            loss = converted_loss(variables, x, labels)
        return loss, tape.gradient(loss, variables)
    return step


def candidates_for(name: str) -> tuple[dict, dict]:
    make_params, loss, make_batch = WORKLOADS[name]
    params = make_params()
    x, labels = make_batch()
    jax_step = jax.jit(jax.value_and_grad(loss))
    params_jax = jax.tree.map(jax.numpy.asarray, params)
    x_jax, labels_jax = jax.numpy.asarray(x), jax.numpy.asarray(labels)
    want_loss, want_grads = jax_step(params_jax, x_jax, labels_jax)
    variables = {k: tf.Variable(v) for k, v in params.items()}
    x_tf, labels_tf = tf.constant(x), tf.constant(labels)
    steps = {
        "ours": _tf_step(jax2tf_native.convert(loss), variables, False),
        "ours jit_compile": _tf_step(jax2tf_native.convert(loss), variables, True),
        # As jax.value_and_grad(loss) does: differentiate the parameters (argument 0) only.
        "ours argnums": _tf_step(jax2tf_native.convert(loss, gradient_argnums=0), variables,
                                 False),
        "ours argnums jit_compile": _tf_step(jax2tf_native.convert(loss, gradient_argnums=0),
                                             variables, True),
        "peer": _tf_step(jax2tf.convert(loss), variables, False),
        "peer jit_compile": _tf_step(jax2tf.convert(loss), variables, True),
    }
    errors = {}
    for label, step in steps.items():
        got_loss, got_grads = step(x_tf, labels_tf)
        errors[label] = max(float(np.max(np.abs(got_grads[k].numpy() - np.asarray(want_grads[k]))))
                            for k in params)
        np.testing.assert_allclose(got_loss.numpy(), want_loss, rtol=1e-4)
    block = lambda out: jax.block_until_ready(out)
    tf_sync = lambda out: [g.numpy() for g in out[1].values()][0]
    candidates = {"jax.jit(value_and_grad)": lambda: block(jax_step(params_jax, x_jax, labels_jax))}
    for label, step in steps.items():
        candidates[label] = (lambda s: lambda: tf_sync(s(x_tf, labels_tf)))(step)
    return candidates, errors


def run(rounds: int) -> dict:
    results = {}
    for name in WORKLOADS:
        candidates, errors = candidates_for(name)
        stats = harness.interleaved(candidates, rounds=rounds)
        base = stats["jax.jit(value_and_grad)"]["median_s"]
        results[name] = {"stats": stats, "max_grad_error_vs_jax": errors,
                         "ratio_vs_jax": {k: v["median_s"] / base for k, v in stats.items()}}
    return {"environment": harness.environment(), "rounds": rounds, "workloads": results,
            "target": {"ours / jax": {"tf.function": 1.10, "jit_compile": 1.05}}}


def section(result: dict) -> dict:
    """`run`'s result as a `rows.section` for the combined report (benchmarks.run)."""
    out = []
    for name, r in result["workloads"].items():
        stats = {k: rows.from_harness(v) for k, v in r["stats"].items()}
        for suffix, setting in (("", "tf.function"), (" jit_compile", "tf.function jit_compile")):
            for variant, label in (("ours", "ours (default)"),
                                   ("ours argnums", "ours gradient_argnums=0")):
                out.append(rows.row(name, setting, jax=stats["jax.jit(value_and_grad)"],
                                    jax_label="jax.jit(value_and_grad)",
                                    peer=stats["peer" + suffix], peer_label="jax2tf" + suffix,
                                    ours=stats[variant + suffix], ours_label=label + suffix))
    description = (
        "One training step's loss and gradients w.r.t. the tf.Variable parameters: "
        "tf.GradientTape through the converted loss inside a tf.function, vs "
        "jax.jit(jax.value_and_grad(loss)); ours with default options (the tape watches the "
        "parameters only, so the forward op returns their residuals and the backward op "
        "computes their cotangents only; TF compiles the two as one XLA program), and with "
        "gradient_argnums=0 (the same, said "
        "explicitly). Targets: default ours/JAX <= 1.10 in a tf.function without jit_compile, <= 1.05 with "
        "jit_compile.")
    details = {name: {"max_grad_error_vs_jax": r["max_grad_error_vs_jax"]}
               for name, r in result["workloads"].items()}
    details["rounds"] = result["rounds"]
    return rows.section("gradient", "Training-step gradient", description, out, details)


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = ["# Training-step gradient: TF tape through the converted loss vs JAX", "",
             f"jax {env['jax']}, tensorflow {env['tensorflow']}, {env['cpus']} CPUs; "
             f"{result['rounds']} interleaved rounds; median per step, ratio to "
             f"`jax.jit(jax.value_and_grad(loss))`.", ""]
    for name, r in result["workloads"].items():
        lines += [f"## {name}", "", "| candidate | per step | ratio vs JAX | max grad error |",
                  "|---|---|---|---|"]
        for label, s in r["stats"].items():
            err = r["max_grad_error_vs_jax"].get(label)
            lines.append(f"| {label} | {s['median_s'] * 1e3:.2f} ms | "
                         f"{r['ratio_vs_jax'][label]:.2f} | {'-' if err is None else f'{err:.1e}'} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    harness.rounds_main("training_step", run, markdown, rounds=30, description=__doc__)


if __name__ == "__main__":
    main()
