"""Re-runs every row of the README's comparison table with the peer (jax.experimental.jax2tf)
and with jax2tf-native, and writes what happened to tools/results/readme_table_check.md.

    python -m tools.readme_table_check
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import jax.scipy.special
import numpy as np
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native
from tools import readme_table_runtime
from tools.readme_table_common import assert_close as _close
from tools.readme_table_common import outcome as _outcome

RESULT = Path(__file__).parent / "results" / "readme_table_check.md"


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


def _linalg_ops(spd: np.ndarray, general: np.ndarray) -> dict:
    """name -> (function, operand[, reference function, when JAX cannot run it]). Where the result is not unique (eigenvectors, Schur and
    Hessenberg bases, Householder signs) the function returns what is: a reconstruction, a
    residual, absolute values."""
    lsl = jax.lax.linalg
    rhs = jnp.ones((4, 2), np.float32)

    def eig_residual(m):
        w, v = jnp.linalg.eig(m)
        return m.astype(v.dtype) @ v - v * w  # ~0: compared with JAX's ~0

    def tridiagonal_solve(m):
        dl = jnp.concatenate([jnp.zeros(1, m.dtype), jnp.diagonal(m, -1)])
        du = jnp.concatenate([jnp.diagonal(m, 1), jnp.zeros(1, m.dtype)])
        return lsl.tridiagonal_solve(dl, jnp.diagonal(m) + 4, du, rhs)

    def gradients(m):
        return jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) ** 2)
                        + jnp.sum(jnp.linalg.svd(a, compute_uv=False))
                        + jnp.sum(jnp.linalg.solve(a, rhs)) + jnp.linalg.slogdet(a)[1])(m)

    return {
        "cholesky": (jnp.linalg.cholesky, spd),
        "solve": (lambda m: jnp.linalg.solve(m, jnp.ones((4,))), spd),
        "inv": (jnp.linalg.inv, spd), "det": (jnp.linalg.det, spd),
        "slogdet": (lambda m: jnp.linalg.slogdet(m)[1], general),
        "solve_triangular": (lambda m: jsl.solve_triangular(m, rhs, lower=True), spd),
        "cho_factor + cho_solve": (lambda m: jsl.cho_solve(jsl.cho_factor(m), rhs), spd),
        "lu_factor + lu_solve": (lambda m: jsl.lu_solve(jsl.lu_factor(m), rhs), general),
        "eigh": (lambda m: jnp.linalg.eigh(m)[0], spd),
        "svd": (lambda m: jnp.linalg.svd(m)[1], spd),
        # JAX's CPU svd has no subset_by_index ("not implemented for CPU and GPU"): the
        # reference is the full svd's first two singular values.
        "svd subset_by_index": (lambda m: lsl.svd(m, full_matrices=False, compute_uv=False,
                                                  subset_by_index=(0, 2)), general,
                                lambda m: jnp.linalg.svd(m, compute_uv=False)[:2]),
        "qr": (lambda m: jnp.linalg.qr(m)[1], spd),
        "qr(pivoting=True)": (lambda m: jsl.qr(m, pivoting=True)[1], general),
        "eigvals (nonsymmetric)": (lambda m: jnp.sort(jnp.linalg.eigvals(m)), general),
        "eig: A V - V diag(w)": (eig_residual, general),
        "schur: Z T Z^T": (lambda m: (lambda t, z: z @ t @ z.T)(*jsl.schur(m)), general),
        "sqrtm": (jsl.sqrtm, spd),
        "funm(exp)": (lambda m: jsl.funm(m, jnp.exp), spd),
        "expm": (jsl.expm, general),
        "hessenberg: Q H Q^T": (
            lambda m: (lambda h, q: q @ h @ q.T)(*jsl.hessenberg(m, calc_q=True)), general),
        "tridiagonal reduction (d, e)": (
            lambda m: jnp.concatenate(lsl.tridiagonal(m)[1:3]), spd),
        "tridiagonal_solve": (tridiagonal_solve, general),
        "lstsq": (lambda m: jnp.linalg.lstsq(m, rhs)[0], general),
        "pinv": (jnp.linalg.pinv, general),
        "matrix_power(-3)": (lambda m: jnp.linalg.matrix_power(m, -3), spd),
        "gradient of eigvalsh + svd + solve + slogdet": (gradients, spd),
    }


def linalg_row(lines: list[str]) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    general = rng.standard_normal((4, 4)).astype(np.float32) + 2 * np.eye(4, dtype=np.float32)
    lines += ["## Row: jnp.linalg / jax.scipy.linalg on CPU", "",
              "Compared with JAX's own CPU result (absolute values: signs and phases are "
              "not unique).", "", "| function | jax2tf | jax2tf-native |", "|---|---|---|"]
    for name, (fn, m, *reference) in _linalg_ops(spd, general).items():
        want = (reference[0] if reference else fn)(m)

        def check(convert, m=m, fn=fn, want=want):
            got = convert(fn)(tf.constant(m))
            np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-3, atol=1e-3)

        lines.append(f"| `{name}` | {_outcome(lambda: check(jax2tf.convert))} | "
                     f"{_outcome(lambda: check(jax2tf_native.convert))} |")
    lines.append("")


def custom_calls_row(lines: list[str]) -> None:
    a = np.eye(3, dtype=np.float32) * 2
    lines += ["## Row: custom calls TF cannot run (LAPACK inverse, JAX's own lowering)", "",
              "| | outcome |", "|---|---|"]
    lines.append(f"| jax2tf | {_outcome(lambda: jax2tf.convert(jnp.linalg.inv)(tf.constant(a)))} |")
    lines.append(f"| jax2tf-native linalg='native' | {_outcome(lambda: jax2tf_native.convert(jnp.linalg.inv, linalg='native')(tf.constant(a)))} |")
    lines.append("")


def call_tf_row(lines: list[str]) -> None:
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    spec = [tf.TensorSpec([4, 3], tf.float32)]
    lines += ["## Row: call_tf inside a converted function", "",
              "| check | jax2tf | jax2tf-native |", "|---|---|---|"]

    def graph_form(convert, use):
        """call_tf(call_tf_graph=True): traced once, then (unless `use` is "first") traced again
        in the way `use` says."""
        f = lambda v: jnp.cos(jax2tf.call_tf(tf.math.sin, call_tf_graph=True)(v)) * 2
        f_tf = convert(f)
        want = np.cos(np.sin(x)) * 2
        _close(tf.function(f_tf, autograph=False, input_signature=spec)(x), want)
        if use == "first":
            return
        if use == "tf.function":
            got = tf.function(f_tf, autograph=False, input_signature=spec)(x)
        elif use == "convert":
            got = tf.function(convert(f), autograph=False, input_signature=spec)(x)
        else:
            variable = tf.Variable(x)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.function(f_tf, autograph=False)(variable))
            got, want = tape.gradient(loss, variable), jax.grad(
                lambda v: jnp.sum(jnp.cos(jnp.sin(v)) * 2))(x)
        _close(got, want)

    quote = "No registered implementation"
    lines.append(f"| `call_tf_graph=True`, the first tf.function call == JAX | "
                 f"{_outcome(lambda: graph_form(jax2tf.convert, 'first'), quote)} | "
                 f"{_outcome(lambda: graph_form(jax2tf_native.convert, 'first'), quote)} |")
    for use, label in (("tf.function", "a second tf.function of it"),
                       ("convert", "a second convert of the same function"),
                       ("gradient", "its gradient in a tf.function")):
        lines.append(f"| `call_tf_graph=True`, first trace, then {label} | "
                     f"{_outcome(lambda: graph_form(jax2tf.convert, use), quote)} | "
                     f"{_outcome(lambda: graph_form(jax2tf_native.convert, use), quote)} |")

    def polymorphic(convert):
        f = lambda v: jnp.sin(jax2tf.call_tf(tf.math.cos)(v))
        run = tf.function(convert(f, polymorphic_shapes=["(b, 3)"]), autograph=False,
                          input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        for n in (2, 5):
            _close(run(x[:n]), np.sin(np.cos(x[:n])))

    quote = "output has dynamic shape"
    lines.append(f"| under a polymorphic batch (`(b, 3)`, batches 2 and 5) | "
                 f"{_outcome(lambda: polymorphic(jax2tf.convert), quote)} | "
                 f"{_outcome(lambda: polymorphic(jax2tf_native.convert), quote)} |")
    lines.append("")


def transformations_row(lines: list[str]) -> None:
    x = np.ones((2, 3), np.float32)
    lines += ["## Row: a converted function under a JAX transformation", "",
              "| transformation | jax2tf | jax2tf-native |", "|---|---|---|"]
    for name, transform in (("jax.jit", jax.jit), ("jax.vmap", jax.vmap),
                            ("jax.grad", lambda g: jax.grad(lambda v: jnp.sum(g(v))))):
        cells = [_outcome(lambda: transform(convert(jnp.sin))(x))
                 for convert in (jax2tf.convert, jax2tf_native.convert)]
        lines.append(f"| `{name}` | {cells[0]} | {cells[1]} |")
    lines.append("")


def plain_row(lines: list[str]) -> None:
    """`enable_xla=False`: what ops the graph of a small dense model holds, and its values."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    fn = lambda x: jax.nn.softmax(jnp.tanh(x @ w), axis=-1)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def graph_ops(convert):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f_tf = convert(fn, enable_xla=False)
        traced = tf.function(f_tf, autograph=False).get_concrete_function(
            tf.TensorSpec((2, 3), tf.float32))
        _close(traced(tf.constant(x)), fn(x))
        graph = traced.graph.as_graph_def()
        types = {n.op for n in graph.node} | {n.op for f in graph.library.function
                                               for n in f.node_def}
        xla = sorted(t for t in types if t.startswith(("Xla", "_Xla")))
        warned = [str(c.message).split(":")[0] for c in caught
                  if issubclass(c.category, DeprecationWarning)]
        return (f"XLA ops in the graph: {xla or 'none'}; {len(types)} op types"
                + (f"; warns: {warned[0]}" if warned else ""))

    def cell(convert) -> str:
        found = []
        failed = _outcome(lambda: found.append(graph_ops(convert)))
        return f"runs; {found[0]}" if found else failed

    lines += ["## Row: enable_xla=False", "", "| | jax2tf | jax2tf-native |", "|---|---|---|",
              f"| softmax(tanh(x @ w)), tf.function graph | {cell(jax2tf.convert)} | "
              f"{cell(jax2tf_native.convert)} |", ""]


def main() -> None:
    lines = [f"# README comparison table, re-run (JAX {jax.__version__}, TF {tf.__version__})",
             "", "Written by `python -m tools.readme_table_check` (load average at the start "
             f"{', '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs: "
             "the timed row is as noisy as the machine).", ""]
    for row in (ops_row, eager_row, gradients_row, bad_shapes_row, linalg_row,
                custom_calls_row, call_tf_row, transformations_row,
                readme_table_runtime.sharded_row, readme_table_runtime.older_tf_row,
                plain_row):
        row(lines)
        print(f"done {row.__name__}", file=sys.stderr)
    RESULT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
