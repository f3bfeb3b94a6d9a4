"""Backward errors of the newly portable linear algebra, TF portable vs JAX's LAPACK.

For each function: the relative backward error of the TF (portable, XlaCallModule) result and
of JAX's native (LAPACK) result on the same input, n = 64, float32 and float64:

- qr(pivoting=True):    |A P - Q R| / |A|, and |Q^H Q - I|
- tridiagonal:          |A - Q T Q^H| / |A| (Q rebuilt from the reflectors), lower=True
- tridiagonal_solve:    |T x - b| / (|T| |x|) on a system that is not diagonally dominant
- eigh subset_by_index: |A V - V diag(w)| / |A| for the 8 largest eigenpairs (LAPACK column:
                        the same slice of the full eigh; JAX has no CPU partial eigh)

Run from the repository root:  PYTHONPATH=. python benchmarks/linalg_accuracy.py
Prints a markdown table (copied into docs/linalg.md).
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax import lax  # noqa: E402

import jax2tf_native  # noqa: E402
from jax2tf_native import linalg_portable  # noqa: E402

N = 64


def _tf(fun, *args):
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(fun), platforms=("cpu",), **extra)(*args)
    linalg_portable.check_module_portable(exported)
    outs = jax2tf_native.call_exported(exported, with_gradient=False)(
        *[tf.constant(a) for a in args])
    return [np.asarray(o, np.float64) if np.asarray(o).dtype.kind == "f" else np.asarray(o)
            for o in jax.tree.leaves(outs)]


def _jax(fun, *args):
    return [np.asarray(o, np.float64) if np.asarray(o).dtype.kind == "f" else np.asarray(o)
            for o in jax.tree.leaves(jax.jit(fun)(*args))]


def _norm(x):
    return float(np.linalg.norm(x, 2)) if x.ndim == 2 else float(np.linalg.norm(x))


def _q_from_reflectors(a, taus):
    n = a.shape[0]
    q = np.eye(n)
    for i in range(n - 1):
        v = np.zeros(n)
        v[i + 1] = 1
        v[i + 2:] = a[i + 2:, i]
        q = q @ (np.eye(n) - taus[i] * np.outer(v, v))
    return q


def measure(dtype) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype(dtype)
    sym = ((a + a.T) / 2).astype(dtype)
    out = {}

    def qrp(x):
        return jsl.qr(x, pivoting=True)

    def qr_err(q, r, p):
        return _norm(a.astype(np.float64)[:, p] - q @ r) / _norm(a.astype(np.float64))

    out["qr(pivoting=True): ‖AP - QR‖/‖A‖"] = (qr_err(*_tf(qrp, a)), qr_err(*_jax(qrp, a)))

    def tri(x):
        return lax.linalg.tridiagonal(x, lower=True)

    def tri_err(arr, d, e, taus):
        t = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
        q = _q_from_reflectors(arr, taus)
        return _norm(sym.astype(np.float64) - q @ t @ q.T) / _norm(sym.astype(np.float64))

    out["tridiagonal: ‖A - Q T Q^T‖/‖A‖"] = (tri_err(*_tf(tri, sym)), tri_err(*_jax(tri, sym)))

    dl, d, du = (rng.standard_normal(N).astype(dtype) for _ in range(3))
    dl[0] = du[-1] = 0
    b = rng.standard_normal((N, 1)).astype(dtype)
    t = (np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)).astype(np.float64)

    def gtsv_err(x):
        return _norm(t @ x - b) / (_norm(t) * _norm(x))

    fn = lax.linalg.tridiagonal_solve
    out["tridiagonal_solve: ‖Tx - b‖/(‖T‖‖x‖)"] = (
        gtsv_err(_tf(fn, dl, d, du, b)[0]), gtsv_err(_jax(fn, dl, d, du, b)[0]))

    def top8(x):
        return lax.linalg.eigh(x, subset_by_index=(N - 8, N))

    def full(x):
        v, w = jnp.linalg.eigh(x)[::-1]
        return v[:, N - 8:], w[N - 8:]

    def eig_err(v, w):
        return _norm(sym.astype(np.float64) @ v - v * w) / _norm(sym.astype(np.float64))

    out["eigh subset_by_index (8 largest): ‖AV - VW‖/‖A‖"] = (
        eig_err(*_tf(top8, sym)), eig_err(*_jax(full, sym)))
    return out


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    print("| n = 64 | float32 portable | float32 LAPACK | float64 portable | float64 LAPACK |")
    print("|---|---:|---:|---:|---:|")
    r32, r64 = measure(np.float32), measure(np.float64)
    for name in r32:
        print(f"| {name} | {r32[name][0]:.1e} | {r32[name][1]:.1e} | "
              f"{r64[name][0]:.1e} | {r64[name][1]:.1e} |")


if __name__ == "__main__":
    main()
