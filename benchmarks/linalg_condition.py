"""Accuracy at condition number 1e4: TF portable vs JAX's LAPACK, float32 and float64.

n = 32, random orthogonal factors, singular values / eigenvalues log-spaced from 1 to 1e-4.
Errors are relative to a float64 (NumPy LAPACK) solution of the same inputs; the backward error
of a solver is |A x - b| / (|A|_2 |x|). eigh and svd are judged by reconstruction
|A - V W V^H| / |A|_2 and orthogonality |Q^H Q - I| (their vectors' signs are free).

Run from the repository root:  PYTHONPATH=. python benchmarks/linalg_condition.py
Prints the markdown tables of docs/linalg.md ("Condition number 1e4").
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402
from jax2tf_native import linalg_portable  # noqa: E402

N, COND, SEED = 32, 1e4, 0


def _with_condition_number(rng, n, cond, symmetric):
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v = u if symmetric else np.linalg.qr(rng.standard_normal((n, n)))[0]
    return (u * np.logspace(0, -np.log10(cond), n)) @ v.T


def _functions():
    """{name: (function of (a, s, b), which reference input it works on)}."""
    return {
        "solve": lambda a, s, b: jnp.linalg.solve(a, b),
        "lu_factor + lu_solve": lambda a, s, b: jsl.lu_solve(jsl.lu_factor(a), b),
        "inv": lambda a, s, b: jnp.linalg.inv(a),
        "cholesky (factor)": lambda a, s, b: jnp.linalg.cholesky(s),
        "cho_factor + cho_solve": lambda a, s, b: jsl.cho_solve(jsl.cho_factor(s), b),
        "slogdet (log abs det)": lambda a, s, b: jnp.linalg.slogdet(a)[1],
        "eigvalsh": lambda a, s, b: jnp.linalg.eigvalsh(s),
        "svdvals": lambda a, s, b: jnp.linalg.svd(a, compute_uv=False),
        "lstsq": lambda a, s, b: jnp.linalg.lstsq(a, b)[0],
        "pinv": lambda a, s, b: jnp.linalg.pinv(a),
        "eigh": lambda a, s, b: jnp.linalg.eigh(s),
        "svd": lambda a, s, b: jnp.linalg.svd(a),
    }


def _portable(fun, *args):
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(fun), platforms=("cpu",), **extra)(*args)
    linalg_portable.check_module_portable(exported)
    out = jax2tf_native.call_exported(exported, with_gradient=False)(
        *[tf.constant(x) for x in args])
    return jax.tree.map(lambda t: np.asarray(t).astype(np.float64), out)


def _native(fun, *args):
    return jax.tree.map(lambda t: np.asarray(t).astype(np.float64), jax.jit(fun)(*args))


def _relative(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def _errors(name, out, a, s, b):
    """(forward or reconstruction error, backward error or orthogonality, or None)."""
    sym = s
    if name in ("solve", "lu_factor + lu_solve", "cho_factor + cho_solve"):
        m = sym if name.startswith("cho") else a
        x_true = np.linalg.solve(m, b)
        backward = np.linalg.norm(m @ out - b) / (np.linalg.norm(m, 2) * np.linalg.norm(out))
        return _relative(out, x_true), backward
    if name == "inv":
        return _relative(out, np.linalg.inv(a)), None
    if name == "cholesky (factor)":
        return _relative(out, np.linalg.cholesky(sym)), None
    if name == "slogdet (log abs det)":
        return abs(out - np.linalg.slogdet(a)[1]) / abs(np.linalg.slogdet(a)[1]), None
    if name == "eigvalsh":
        return _relative(out, np.linalg.eigvalsh(sym)), None
    if name == "svdvals":
        return _relative(out, np.linalg.svd(a, compute_uv=False)), None
    if name == "lstsq":
        return _relative(out, np.linalg.lstsq(a, b, rcond=None)[0]), None
    if name == "pinv":
        return _relative(out, np.linalg.pinv(a)), None
    if name == "eigh":
        w, v = out
        recon = np.linalg.norm((v * w) @ v.T - sym, 2) / np.linalg.norm(sym, 2)
        return recon, np.linalg.norm(v.T @ v - np.eye(len(w)), 2)
    if name == "svd":
        u, sv, vh = out
        recon = np.linalg.norm((u * sv) @ vh - a, 2) / np.linalg.norm(a, 2)
        return recon, np.linalg.norm(u.T @ u - np.eye(len(sv)), 2)
    raise KeyError(name)


def measure(dtype) -> list[tuple[str, tuple, tuple]]:
    """[(name, (portable errors), (LAPACK errors))] on one set of inputs of `dtype`."""
    rng = np.random.default_rng(SEED)
    a64 = _with_condition_number(rng, N, COND, symmetric=False)
    s64 = _with_condition_number(rng, N, COND, symmetric=True)
    b64 = rng.standard_normal((N, 1))
    a, s, b = (x.astype(dtype) for x in (a64, s64, b64))
    rows = []
    for name, fun in _functions().items():
        print(f"  {np.dtype(dtype).name} {name} ...", flush=True)
        rows.append((name, _errors(name, _portable(fun, a, s, b), a64, s64, b64),
                     _errors(name, _native(fun, a, s, b), a64, s64, b64)))
    return rows


def _fmt(x):
    return "" if x is None else f"{x:.1e}"


def table(rows, dtype_name) -> str:
    lines = [f"| {dtype_name} | portable | LAPACK | backward error or orthogonality: "
             "portable / LAPACK |", "|---|---:|---:|---:|"]
    for name, ours, lapack in rows:
        second = (f"{_fmt(ours[1])} / {_fmt(lapack[1])}" if ours[1] is not None else "")
        label = (f"{name}: reconstruction / orthogonality" if name in ("eigh", "svd")
                 else name)
        lines.append(f"| {label} | {_fmt(ours[0])} | {_fmt(lapack[0])} | {second} |")
    return "\n".join(lines)


def main() -> None:
    print(f"n = {N}, condition number {COND:g}, seed {SEED}; JAX {jax.__version__}, "
          f"TF {tf.__version__}")
    f32 = measure(np.float32)
    with jax.enable_x64(True):
        f64 = measure(np.float64)
    print()
    print(table(f32, "float32"))
    print()
    print(table(f64, "float64"))


if __name__ == "__main__":
    main()
