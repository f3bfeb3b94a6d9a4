"""How close TF's linear-algebra kernels in plain graphs come to JAX's LAPACK results.

`convert(f, enable_xla=False)` runs cholesky, triangular solves, eigh and svd on TF's kernels
(`tf_ops/plain/lapack_kernels.py`). Per decomposition, dtype and matrix size (a batch of 8
random matrices), the largest difference from `jax.jit` on CPU, relative to the largest entry
of JAX's result; eigenvectors and singular vectors after aligning each vector's sign (phase),
the freedom that defines them. Then the matrices where LAPACK's success is a matter of rounding:
Gaussian-kernel matrices without jitter (numerically semidefinite), counting where the plain
graph and JAX disagree on failure (NaN).

Sizes stop at 64: with n = 200 after the smaller sizes, `jax.jit(decompositions)` stalled twice
in this process (all threads waiting, no CPU used; the same call alone, or after n = 64 only,
took 16-30 s), not investigated further.

Not part of the test run (tests/tf_ops/plain/test_lapack_kernels.py checks the contract).
Run: `nice -n 10 python tools/plain_lapack_exactness.py [--write]` (writes
tools/results/plain_lapack_exactness.md).
"""
from __future__ import annotations

import argparse
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jax2tf_native  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results" / "plain_lapack_exactness.md"
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
SIZES = (4, 16, 64)
BATCH = 8


def _mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def decompositions(a, b):
    c = jnp.linalg.cholesky(a)
    w, v = jnp.linalg.eigh(a)
    u, s, vh = jnp.linalg.svd(a[..., :, : a.shape[-1] // 2 + 1], full_matrices=False)
    return {"cholesky": c, "cho_solve": jsl.cho_solve((c, True), b),
            "solve_triangular (trans=C)": jsl.solve_triangular(c, b, lower=True, trans=2),
            "eigh eigenvalues": w, "eigh eigenvectors": v, "svd singular values": s,
            "svd U": u, "svd VH": vh}


def _aligned(got, want, axis):
    phase = np.sum(np.conj(got) * want, axis=axis, keepdims=True)
    return got * phase / np.where(np.abs(phase) == 0, 1, np.abs(phase))


def measure(dtype, n, rng) -> dict[str, float]:
    complex_ = np.iscomplexobj(dtype(0))
    x = rng.randn(BATCH, n, n) + (1j * rng.randn(BATCH, n, n) if complex_ else 0)
    a = (x @ np.conj(np.swapaxes(x, -1, -2)) / n + 0.1 * np.eye(n)).astype(dtype)
    b = (rng.randn(BATCH, n, 3) + (1j * rng.randn(BATCH, n, 3) if complex_ else 0)).astype(dtype)
    want = jax.jit(decompositions)(a, b)
    got = tf.function(jax2tf_native.convert(decompositions, enable_xla=False),
                      autograph=False)(a, b)
    out = {}
    for name, w in want.items():
        w, g = np.asarray(w), got[name].numpy()
        if name in ("eigh eigenvectors", "svd U"):
            g = _aligned(g, w, axis=-2)
        elif name == "svd VH":
            g = _aligned(g, w, axis=-1)
        out[name] = float(np.max(np.abs(g - w)) / np.max(np.abs(w)))
    return out


def gp_kernel(x):
    sq = jnp.sum((x[:, :, None, :] - x[:, None, :, :]) ** 2, axis=-1)
    return jnp.linalg.cholesky(jnp.exp(-0.5 * sq))


def failure_agreement(rng, n=32, count=200) -> dict:
    """Gaussian-kernel matrices without jitter: numerically semidefinite, so whether LAPACK's
    potrf succeeds depends on rounding."""
    x = rng.uniform(-2, 2, (count, n, 2)).astype(np.float32)
    want = np.isnan(np.asarray(jax.jit(gp_kernel)(x))).any(axis=(-2, -1))
    got = np.isnan(tf.function(jax2tf_native.convert(gp_kernel, enable_xla=False),
                               autograph=False)(x).numpy()).any(axis=(-2, -1))
    return {"matrices": count, "n": n, "jax_failed": int(want.sum()),
            "plain_failed": int(got.sum()), "disagree": int((want != got).sum())}


def markdown(rows, agreement) -> str:
    names = list(rows[0][2])
    lines = ["# Plain graphs' linear algebra on TF's kernels vs JAX's LAPACK", "",
             "`python tools/plain_lapack_exactness.py`: largest |plain - jax.jit| over a batch "
             f"of {BATCH} random matrices, relative to the largest |jax.jit| entry (SPD "
             "`X X^H / n + 0.1 I`; svd of its first n/2+1 columns). Eigenvectors and singular "
             "vectors after aligning each vector's sign (phase), the freedom that defines "
             "them.", "",
             "| dtype | n | " + " | ".join(names) + " |",
             "|---|---:|" + "---:|" * len(names)]
    for dtype, n, values in rows:
        lines.append(f"| {np.dtype(dtype).name} | {n} | "
                     + " | ".join(f"{values[k]:.1e}" for k in names) + " |")
    lines += ["", "## Where LAPACK's success is a matter of rounding", "",
              f"{agreement['matrices']} Gaussian-kernel matrices (n = {agreement['n']}, "
              "float32, no jitter; numerically semidefinite): `jnp.linalg.cholesky` failed "
              f"(NaN) for {agreement['jax_failed']} in JAX and {agreement['plain_failed']} in "
              f"the plain graph; they disagree on {agreement['disagree']}. Both fail on a "
              "pivot <= 0 (or NaN), each in its own rounding (LAPACK's blocked potrf, Eigen's "
              "blocked LLT): near the boundary the verdict can differ, as it can between two "
              "LAPACK builds.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    rows = []
    with jax.enable_x64(True):
        for dtype in DTYPES:
            for n in SIZES:
                rows.append((dtype, n, measure(dtype, n, rng)))
                print(np.dtype(dtype).name, n, {k: f"{v:.1e}" for k, v in rows[-1][2].items()},
                      flush=True)
    agreement = failure_agreement(rng)
    text = markdown(rows, agreement)
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
