"""Linear algebra as plain TF ops (`enable_xla=False`) vs one `XlaCallModule` op.

The workload is a Gaussian-process posterior on a batch of small problems: for inputs
`x[b, n, d]`, `y[b, n]` it builds the SPD kernel matrix `K = exp(-|xi - xj|^2 / 2) + 0.1 I`,
then `L = cholesky(K)`, `alpha = cho_solve((L, True), y)`, the posterior mean `K alpha`, the
log determinant `2 sum log diag L`, and `w, v = eigh(K)` with the eigen-solve
`v diag(1/w) v^T y` (sign-free, so every candidate is checked against `jax.jit`). Matrices of
16x16 (batch 64) and 64x64 (batch 16).

Candidates, timed interleaved with the order changing every round (`harness.interleaved`),
blocks of calls per round (`calibrate`), one untimed call before each block:

- `jax.jit` (for scale: JAX's own CPU lowering, LAPACK);
- `xla tf.function`: `tf.function(convert(f))`, the `XlaCallModule` op run by TF's XLA;
- `plain tf.function`: `tf.function(convert(f, enable_xla=False))`, ordinary TF ops.

Also reported per workload: the plain graph's node count and its linear-algebra op types.
The target: plain within 1.5x of the `XlaCallModule` graph.

Run: `nice -n 10 python -m benchmarks.linalg_plain [--rounds N] [--write]` (writes
`benchmarks/results/linalg_plain.md` / `.json`).
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402
from benchmarks import calibrate, harness, rows  # noqa: E402

WORKLOADS = ((64, 16), (16, 64))  # (batch, matrix size n)
FEATURES = 3
TARGET_RATIO = 1.5
# Op types that do linear algebra (the rest is elementwise, shape and loop plumbing).
LINALG_OP_TYPES = ("Cholesky", "MatrixTriangularSolve", "SelfAdjointEigV2", "Qr", "Svd", "Lu",
                   "While", "StatelessWhile")


def gp_posterior(x, y):
    """Posterior mean, log determinant, eigenvalues and eigen-solve of a GP per batch row."""
    sq = jnp.sum((x[:, :, None, :] - x[:, None, :, :]) ** 2, axis=-1)
    k = jnp.exp(-0.5 * sq) + 0.1 * jnp.eye(x.shape[1], dtype=x.dtype)
    chol = jnp.linalg.cholesky(k)
    alpha = jsl.cho_solve((chol, True), y[..., None])[..., 0]
    mean = jnp.einsum("bij,bj->bi", k, alpha)
    logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    w, v = jnp.linalg.eigh(k)
    eigen_solve = jnp.einsum("bij,bj->bi", v, jnp.einsum("bji,bj->bi", v, y) / w)
    return mean, logdet, w, eigen_solve


def inputs(batch: int, n: int):
    rng = np.random.RandomState(n)
    x = rng.uniform(-3, 3, (batch, n, FEATURES)).astype(np.float32)
    y = rng.randn(batch, n).astype(np.float32)
    return x, y


def graph_nodes(concrete) -> list[str]:
    """Op type of every node of a concrete function's graph and of its library functions."""
    graph_def = concrete.graph.as_graph_def()
    types = [node.op for node in graph_def.node]
    for function in graph_def.library.function:
        types += [node.op for node in function.node_def]
    return types


def candidates_for(batch: int, n: int) -> tuple[dict, dict]:
    """({label: zero-argument callable}, notes); every candidate checked against jax.jit."""
    x, y = inputs(batch, n)
    x_tf, y_tf = tf.constant(x), tf.constant(y)
    jitted = jax.jit(gp_posterior)
    x_jax, y_jax = jax.device_put(x), jax.device_put(y)
    want = [np.asarray(w) for w in jitted(x_jax, y_jax)]
    fns = {"xla tf.function": tf.function(jax2tf_native.convert(gp_posterior), autograph=False),
           "plain tf.function": tf.function(jax2tf_native.convert(gp_posterior,
                                                                  enable_xla=False),
                                            autograph=False)}
    notes = {}
    nodes = graph_nodes(fns["plain tf.function"].get_concrete_function(x_tf, y_tf))
    assert not [t for t in nodes if t.startswith(("Xla", "_Xla"))], "XLA ops in the plain graph"
    notes["plain graph nodes"] = len(nodes)
    notes["plain linalg op types"] = {t: nodes.count(t) for t in sorted(set(nodes))
                                      if t in LINALG_OP_TYPES}
    for label, fn in fns.items():
        got = fn(x_tf, y_tf)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-3, atol=2e-3,
                                       err_msg=f"b{batch} n{n}: {label} differs from jax.jit")
    candidates = {"jax.jit": lambda: [np.asarray(o) for o in jitted(x_jax, y_jax)]}
    for label, fn in fns.items():
        candidates[label] = (lambda f: lambda: [o.numpy() for o in f(x_tf, y_tf)])(fn)
    return candidates, notes


def run(rounds: int, workloads=WORKLOADS) -> list[dict]:
    results = []
    for batch, n in workloads:
        candidates, notes = candidates_for(batch, n)
        calls = calibrate.calls_per_round(candidates)
        stats = {k: rows.from_harness(v) for k, v in harness.interleaved(
            candidates, rounds=rounds, calls_per_round=calls, settle=1).items()}
        results.append({"workload": f"b{batch} {n}x{n}", "calls_per_round": calls,
                        "stats": stats, "notes": notes})
        print(f"b{batch} {n}x{n}: " + ", ".join(f"{k} {v['median'] * 1e3:.3f} ms"
                                                for k, v in stats.items()), flush=True)
    return results


def _ms(stats: dict) -> str:
    return f"{stats['median'] * 1e3:.3f} ({stats['p10'] * 1e3:.3f}–{stats['p90'] * 1e3:.3f})"


def _ratio_cell(a: dict, b: dict) -> str:
    pair = rows.paired(a, b)
    text = f"{a['median'] / b['median']:.2f}"
    if pair:
        text += f" (per round {pair['median']:.2f}, {pair['p10']:.2f}–{pair['p90']:.2f})"
    return text


def markdown(results: list[dict], command: str, load: dict) -> str:
    lines = [
        "# Linear algebra as plain TF ops vs XlaCallModule", "",
        f"`{command}`. {harness.machine_sentence(load)} Medians in ms per call, (p10–p90) over "
        "the rounds; ratios of medians, and the median (p10–p90) of the per-round ratios "
        "(candidates timed interleaved, the order changing every round). Workload: a GP "
        "posterior per batch row (`cholesky`, `cho_solve`, `eigh`; "
        "`benchmarks/linalg_plain.py`). Each candidate's outputs were checked against "
        f"`jax.jit` before timing. Target: plain / xla tf.function <= {TARGET_RATIO}.", "",
        "| workload | jax.jit | xla tf.function | plain tf.function | plain / xla tf.function "
        "| plain / jax.jit | plain graph nodes | plain linalg ops |",
        "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        s, notes = r["stats"], r["notes"]
        ops = ", ".join(f"{t} x{c}" for t, c in notes["plain linalg op types"].items()) or "–"
        lines.append(
            f"| {r['workload']} | {_ms(s['jax.jit'])} | {_ms(s['xla tf.function'])} | "
            f"{_ms(s['plain tf.function'])} | "
            f"{_ratio_cell(s['plain tf.function'], s['xla tf.function'])} | "
            f"{_ratio_cell(s['plain tf.function'], s['jax.jit'])} | "
            f"{notes['plain graph nodes']} | {ops} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--write", default=None, nargs="?", const="linalg_plain",
                        help="write benchmarks/results/NAME.md and .json (default NAME: "
                             "linalg_plain)")
    args = parser.parse_args()
    recorded = harness.LoadRecord()
    results = run(args.rounds)
    load = recorded.finish()
    command = f"python -m benchmarks.linalg_plain --rounds {args.rounds}"
    text = markdown(results, command, load)
    text += f"\n({recorded.minutes:.1f} min.)\n"
    print(text)
    if args.write:
        harness.write_results(args.write, {"environment": harness.environment(),
                                           "load_average": load, "results": results}, text)


if __name__ == "__main__":
    main()
