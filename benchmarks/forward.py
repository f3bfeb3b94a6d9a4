"""Forward (inference) passes: MLP, CNN and transformer block, at two batch sizes each.

Each TF candidate is a `tf.function` closing over `tf.Variable` parameters (as a served model
does), with and without `jit_compile`. Ours runs twice: with default options (a gradient may
be taken later; with no tape recording the forward op is the primal module) and with
`with_gradient=False`. Targets: ours <= 1.05x `jax.jit` at batch 256 (issue 7); default <= 1.05x
`with_gradient=False`, and with `jit_compile` <= 1.02x the peer (issue 15).
Run alone: `python -m benchmarks.forward [--rounds N]`.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import calibrate, harness, models, rows, transformer  # noqa: E402

MODELS = {
    "mlp": (models.mlp_params, models.mlp_apply, lambda b: models.mlp_batch(b)[0]),
    "cnn": (models.cnn_params, models.cnn_apply, lambda b: models.cnn_batch(b)[0]),
    "transformer": (transformer.params, transformer.apply, lambda b: transformer.batch(b)[0]),
}
# (model, batch): batch 256 is where the target applies; the transformer block (seq 128) uses 8.
WORKLOADS = (("mlp", 1), ("mlp", 256), ("cnn", 1), ("cnn", 256),
             ("transformer", 1), ("transformer", 8))
# label -> (convert options, row label)
OURS_VARIANTS = {"ours": ({}, "ours (default)"),
                 "ours no-grad": ({"with_gradient": False}, "ours (with_gradient=False)")}


def _tf_forward(converted, variables, jit_compile: bool):
    return tf.function(lambda x: converted(variables, x), autograph=False,
                       jit_compile=jit_compile)


def workload(model: str, batch: int):
    """One model at one batch size, ready for every candidate: (apply_fn, params, x, jitted,
    params_jax, x_jax, want (jax.jit's output), variables, x_tf). Shared with plain_ops."""
    make_params, apply_fn, make_input = MODELS[model]
    params = make_params()
    x = make_input(batch)
    jitted = jax.jit(apply_fn)
    params_jax = jax.tree.map(jax.numpy.asarray, params)
    x_jax = jax.numpy.asarray(x)
    want = np.asarray(jitted(params_jax, x_jax))
    variables = {k: tf.Variable(v) for k, v in params.items()}
    return apply_fn, params, x, jitted, params_jax, x_jax, want, variables, tf.constant(x)


def candidates_for(model: str, batch: int) -> dict:
    """{label: zero-argument callable running one synchronized forward pass}."""
    (apply_fn, _, _, jitted, params_jax, x_jax, want, variables,
     x_tf) = workload(model, batch)
    tf_fns = {}
    for jit_compile in (False, True):
        suffix = " jit_compile" if jit_compile else ""
        tf_fns["jax2tf" + suffix] = _tf_forward(jax2tf.convert(apply_fn), variables, jit_compile)
        for label, (options, _) in OURS_VARIANTS.items():
            tf_fns[label + suffix] = _tf_forward(
                jax2tf_native.convert(apply_fn, **options), variables, jit_compile)
    for label, fn in tf_fns.items():
        np.testing.assert_allclose(fn(x_tf).numpy(), want, rtol=2e-4, atol=2e-4,
                                   err_msg=f"{model} b{batch}: {label} differs from jax.jit")
    candidates = {"jax.jit": lambda: jitted(params_jax, x_jax).block_until_ready()}
    for label, fn in tf_fns.items():
        candidates[label] = (lambda f: lambda: f(x_tf).numpy())(fn)
    return candidates


def run(rounds: int = 30, jit_only: bool = False) -> dict:
    """Measures every workload; returns a `rows.section`.

    `jit_only`: only `jax.jit` and the `jit_compile` candidates (the focused check of "with
    jit_compile, default <= 1.02x jax2tf": fewer candidates, so more rounds in the same time).
    """
    out, calls = [], {}
    settings = (((" jit_compile", "tf.function jit_compile"),) if jit_only else
                (("", "tf.function"), (" jit_compile", "tf.function jit_compile")))
    for model, batch in WORKLOADS:
        name = f"{model} b{batch}"
        candidates = candidates_for(model, batch)
        if jit_only:
            candidates = {k: v for k, v in candidates.items()
                          if k == "jax.jit" or k.endswith(" jit_compile")}
        calls[name] = calibrate.calls_per_round(candidates)
        # settle=1: the first call after another candidate's block (thread pool woken, weights
        # back in cache) is not part of a steady-state forward call (benchmarks/harness.py).
        stats = {k: rows.from_harness(v) for k, v in harness.interleaved(
            candidates, rounds=rounds, calls_per_round=calls[name], settle=1).items()}
        for suffix, setting in settings:
            for label, (_, row_label) in OURS_VARIANTS.items():
                out.append(rows.row(
                    name, setting, jax=stats["jax.jit"], jax_label="jax.jit",
                    peer=stats["jax2tf" + suffix], peer_label="jax2tf" + suffix,
                    ours=stats[label + suffix], ours_label=row_label + suffix))
    description = (
        "Forward pass per call, parameters as tf.Variables, input a tf.Tensor, result copied to "
        "numpy (JAX: block_until_ready). `ours (default)`: convert's default options (no tape "
        "records, so the forward op is the primal module and nothing else is exported); "
        "`ours (with_gradient=False)`: no gradient possible. Each round times a block of "
        "consecutive calls per candidate (benchmarks/calibrate.py), after one untimed call, in an "
        "order that changes every round. Targets: ours/JAX <= 1.05 "
        "at batch 256; default <= 1.05x with_gradient=False; with jit_compile, default <= 1.02x jax2tf.")
    return rows.section("forward", "Forward pass", description, out,
                        {"rounds": rounds, "calls_per_round": calls})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--jit-only", action="store_true",
                        help="only jax.jit and the jit_compile candidates")
    parser.add_argument("--write", metavar="NAME",
                        help="also write results/NAME.json and .md (with the target checks)")
    args = parser.parse_args()
    from benchmarks import report, targets
    load = os.getloadavg()
    section = run(args.rounds, jit_only=args.jit_only)
    checks = targets.evaluate([section])
    text = (f"`python -m benchmarks.forward --rounds {args.rounds}"
            f"{' --jit-only' if args.jit_only else ''}`; load average at the start "
            f"{load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs.\n\n"
            + report.targets_markdown(checks) + "\n" + report.section_markdown(section))
    print(text)
    if args.write:
        harness.write_results(args.write, {"environment": harness.environment(),
                                           "load_average": load, "section": section,
                                           "targets": checks}, text)


if __name__ == "__main__":
    main()
