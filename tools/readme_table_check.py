"""Re-runs every row of the README's comparison table with the peer (jax.experimental.jax2tf)
and with jax2tf-native, and writes what happened to tools/results/readme_table_check.md.

    python -m tools.readme_table_check
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native

RESULT = Path(__file__).parent / "results" / "readme_table_check.md"


def _outcome(fn) -> str:
    try:
        fn()
        return "runs"
    except Exception as e:  # noqa: BLE001 -- the message is the result here
        text = str(e).strip()
        if text.startswith("{{function_node"):  # TF's op-location prefix says nothing
            text = text.split("}}", 1)[-1].strip()
        first = text.splitlines()[0] if text else ""
        return f"fails: {type(e).__name__}: {first[:110].replace('|', '/')}"


def _close(got, want) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def ops_row(lines: list[str]) -> None:
    x = np.linspace(-0.9, 0.9, 10, dtype=np.float32).reshape(2, 5)
    ops = {
        "jax.lax.erf": jax.lax.erf,
        "jax.scipy.special.erf": jax.scipy.special.erf,
        "jax.nn.gelu(approximate=False)": lambda v: jax.nn.gelu(v, approximate=False),
        "jax.scipy.special.erfinv": jax.scipy.special.erfinv,
        "jnp.arcsin": jnp.arcsin, "jnp.arccos": jnp.arccos, "jnp.arctan": jnp.arctan,
        "jnp.sinh": jnp.sinh, "jnp.cosh": jnp.cosh, "jnp.tan": jnp.tan,
        "jnp.arcsinh": jnp.arcsinh, "jnp.arccosh": lambda v: jnp.arccosh(v + 2),
        "jnp.arctanh": jnp.arctanh, "jax.lax.top_k": lambda v: jax.lax.top_k(v, 2),
    }
    lines += ["## Row: ops the peer cannot run", "", "| function | jax2tf | jax2tf-native |",
              "|---|---|---|"]
    for name, fn in ops.items():
        want = fn(x)
        peer = _outcome(lambda: _close(jax2tf.convert(fn)(tf.constant(x)), want))
        ours = _outcome(lambda: _close(jax2tf_native.convert(fn)(tf.constant(x)), want))
        lines.append(f"| `{name}` | {peer} | {ours} |")
    lines.append("")


def _median_ms(fn, n: int = 300) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def eager_row(lines: list[str]) -> None:
    fn = lambda v: jnp.sin(v) * 2
    x = tf.constant(np.ones((8,), np.float32))
    spec = [tf.TensorSpec([8], tf.float32)]
    peer = jax2tf.convert(fn)
    ours = jax2tf_native.convert(fn)
    peer_graph = tf.function(peer, autograph=False, input_signature=spec)
    ours_graph = tf.function(ours, autograph=False, input_signature=spec)
    # Interleaved, in one process, so that load on the machine hits both alike.
    result = {}
    for round_ in range(3):
        for name, f in (("peer eager", peer), ("peer tf.function", peer_graph),
                        ("ours eager", ours), ("ours tf.function", ours_graph)):
            result.setdefault(name, []).append(_median_ms(lambda: f(x), n=100))
    med = {k: statistics.median(v) for k, v in result.items()}
    lines += ["## Row: eager calls (`sin(x)*2`, float32[8], median of 3 rounds x 100 calls)",
              "", "| | ms per call | / own tf.function |", "|---|---:|---:|"]
    for who in ("peer", "ours"):
        ratio = med[f"{who} eager"] / med[f"{who} tf.function"]
        lines.append(f"| {who} eager | {med[f'{who} eager']:.3f} | {ratio:.2f}x |")
        lines.append(f"| {who} tf.function | {med[f'{who} tf.function']:.3f} | 1.00x |")
    lines.append("")


def gradients_row(lines: list[str]) -> None:
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    want1 = jax.grad(loss)(w, x)
    want2 = jax.hessian(loss)(w, x)
    lines += ["## Row: gradients", "", "| check | jax2tf | jax2tf-native |", "|---|---|---|"]

    def first(convert):
        f = convert(loss)
        wv = tf.Variable(w)
        with tf.GradientTape() as tape:
            y = f(wv, x)
        _close(tape.gradient(y, wv), want1)

    def second(convert):
        f = convert(loss)
        wv = tf.Variable(w)
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                y = f(wv, x)
            g = inner.gradient(y, wv)
        _close(outer.jacobian(g, wv), want2)

    def forward_ops(convert):
        """XlaCallModule ops and their output counts in the gradient graph."""
        f = tf.function(lambda wv, xv: tf.gradients(convert(loss)(wv, xv), wv)[0],
                        autograph=False)
        graph = f.get_concrete_function(tf.TensorSpec([4, 3]), tf.TensorSpec([5, 4])).graph
        return [len(op.outputs) for op in graph.get_operations() if op.type == "XlaCallModule"]

    lines.append(f"| first order == jax.grad | {_outcome(lambda: first(jax2tf.convert))} | "
                 f"{_outcome(lambda: first(jax2tf_native.convert))} |")
    lines.append(f"| second order == jax.hessian | {_outcome(lambda: second(jax2tf.convert))} |"
                 f" {_outcome(lambda: second(jax2tf_native.convert))} |")
    lines.append(f"| XlaCallModule ops in the gradient graph (outputs each) | "
                 f"{forward_ops(jax2tf.convert)} | {forward_ops(jax2tf_native.convert)} |")
    lines.append("")


def bad_shapes_row(lines: list[str]) -> None:
    fn = lambda params, x: x @ params["w"]
    two = lambda x, y: x + y
    params = {"w": np.ones((3, 2), np.float32)}
    cases = {
        "spec (b, 3), called with float32[4, 5]": (
            fn, [None, "(b, 3)"], (params, np.ones((4, 5), np.float32))),
        "spec (b, 3), called with float32[4] (wrong rank)": (
            fn, [None, "(b, 3)"], (params, np.ones((4,), np.float32))),
        "spec (b, 3, 1) for a rank-2 argument": (
            fn, [None, "(b, 3, 1)"], (params, np.ones((4, 3), np.float32))),
        "two arguments (b,) and (b,), called with [3] and [4]": (
            two, ["(b,)", "(b,)"], (np.ones(3, np.float32), np.ones(4, np.float32))),
        "params leaf w float32[5, 2] where the model needs [3, 2]": (
            fn, [None, "(b, 3)"], ({"w": np.ones((5, 2), np.float32)},
                                   np.ones((4, 3), np.float32))),
    }
    lines += ["## Row: bad shapes", "", "| case | jax2tf | jax2tf-native |", "|---|---|---|"]
    for case, (f, spec, args) in cases.items():
        peer = _outcome(lambda: jax2tf.convert(f, polymorphic_shapes=spec)(*args))
        ours = _outcome(lambda: jax2tf_native.convert(f, polymorphic_shapes=spec)(*args))
        lines.append(f"| {case} | {peer} | {ours} |")
    lines.append("")


def linalg_row(lines: list[str]) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    ops = {"cholesky": lambda m: jnp.linalg.cholesky(m), "solve": lambda m: jnp.linalg.solve(
        m, jnp.ones((4,))), "inv": jnp.linalg.inv, "det": jnp.linalg.det,
        "eigh": lambda m: jnp.linalg.eigh(m)[0], "svd": lambda m: jnp.linalg.svd(m)[1],
        "qr": lambda m: jnp.linalg.qr(m)[1]}
    lines += ["## Row: jnp.linalg on CPU", "", "| function | jax2tf | jax2tf-native |",
              "|---|---|---|"]
    for name, fn in ops.items():
        want = fn(spd)

        def peer_check(m=spd, fn=fn, want=want):
            got = jax2tf.convert(fn)(tf.constant(m))
            np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-3, atol=1e-3)

        def ours_check(m=spd, fn=fn, want=want):
            got = jax2tf_native.convert(fn)(tf.constant(m))
            np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-3, atol=1e-3)

        lines.append(f"| `{name}` | {_outcome(peer_check)} | {_outcome(ours_check)} |")
    lines.append("")


def custom_calls_row(lines: list[str]) -> None:
    a = np.eye(3, dtype=np.float32) * 2
    lines += ["## Row: custom calls TF cannot run (LAPACK inverse, JAX's own lowering)", "",
              "| | outcome |", "|---|---|"]
    lines.append(f"| jax2tf | {_outcome(lambda: jax2tf.convert(jnp.linalg.inv)(tf.constant(a)))} |")
    lines.append(f"| jax2tf-native linalg='native' | {_outcome(lambda: jax2tf_native.convert(jnp.linalg.inv, linalg='native')(tf.constant(a)))} |")
    lines.append("")


def main() -> None:
    lines = [f"# README comparison table, re-run (JAX {jax.__version__}, TF {tf.__version__})",
             "", "Written by `python -m tools.readme_table_check`.", ""]
    for row in (ops_row, eager_row, gradients_row, bad_shapes_row, linalg_row,
                custom_calls_row):
        row(lines)
        print(f"done {row.__name__}", file=sys.stderr)
    RESULT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
