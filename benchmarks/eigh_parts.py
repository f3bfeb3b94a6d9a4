"""Where the portable eigh's time goes: each stage exported alone and run in TF (float32).

Stages (jax2tf_native/linalg/): the blocked tridiagonal reduction, multisection for the
eigenvalues, inverse iteration for the eigenvectors (and, inside it, one shifted solve and
one QR), the back-transformation; then the whole `jnp.linalg.eigh` in TF and JAX's LAPACK
`eigh` for reference. One thread per runtime, as benchmarks/linalg_bench.py (whose TF
harness this reuses). Prints a markdown table; docs/linalg.md quotes it.

Run from the repository root:
    PYTHONPATH=. python benchmarks/eigh_parts.py [--sizes 64,512] [--rounds 5]
"""
from __future__ import annotations

import argparse
import sys

sys.argv, _ARGS = sys.argv[:1], sys.argv[1:]  # linalg_bench parses nothing at import
from benchmarks import linalg_bench  # noqa: E402  (sets the thread pinning first)
from benchmarks import harness  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jax2tf_native.linalg import eigh as eigh_module  # noqa: E402
from jax2tf_native.linalg import tridiagonal_blocked, tridiagonal_eigen  # noqa: E402


def _time(call, rounds):
    """(first call's seconds, median seconds of `rounds` more calls)."""
    first = harness.first_call_seconds(call)
    ready = lambda: jax.block_until_ready(call())
    return first, harness.interleaved({"call": ready}, rounds=rounds, warmup=0)["call"]["median_s"]


def stages(n: int):
    a = linalg_bench._inputs("eigh", n)[0]
    points = eigh_module._multisection_points(n)
    iterations = eigh_module._INVERSE_ITERATIONS
    d, e, vs, tmats = (np.asarray(x) for x in jax.jit(
        tridiagonal_blocked.reduce_to_tridiagonal)(a))
    w, tnorm = (np.asarray(x) for x in jax.jit(
        lambda d, e: tridiagonal_eigen.eigenvalues(d, e, points=points))(d, e))
    z = np.asarray(jax.jit(lambda *t: tridiagonal_eigen.eigenvectors(
        *t, iterations=iterations))(d, e, w, tnorm))
    tol = np.float32(np.finfo(np.float32).eps * tnorm)
    return {
        "tridiagonal reduction (blocked)": (tridiagonal_blocked.reduce_to_tridiagonal, (a,)),
        f"eigenvalues (multisection, {points} points)": (
            lambda d, e: tridiagonal_eigen.eigenvalues(d, e, points=points), (d, e)),
        f"eigenvectors ({iterations + 1} solves + QRs)": (
            lambda *t: tridiagonal_eigen.eigenvectors(*t, iterations=iterations),
            (d, e, w, tnorm)),
        "  one shifted solve": (
            lambda d, e, w, z: tridiagonal_eigen._shifted_solve(d, e, w, z, tol), (d, e, w, z)),
        "  one QR": (tridiagonal_eigen._orthonormalize_in_order, (z,)),
        "back-transformation (WY)": (tridiagonal_blocked.apply_q, (vs, tmats, z)),
        "whole eigh": (jnp.linalg.eigh, (a,)),
    }, a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,512")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(_ARGS)
    load = harness.LoadRecord()
    print(f"1-minute load average at start: {load.start:.1f}\n")
    print("| n | stage | TF median | TF first call |")
    print("|---:|---|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        table, a = stages(n)
        for name, (fun, fun_args) in table.items():
            first, median = _time(linalg_bench.tf_portable(fun, fun_args), args.rounds)
            print(f"| {n} | {name} | {median * 1e3:.2f} ms | {first:.2f} s |", flush=True)
        jitted = jax.jit(jnp.linalg.eigh)
        first, median = _time(lambda: jitted(a), args.rounds)
        print(f"| {n} | JAX LAPACK eigh (reference) | {median * 1e3:.2f} ms | {first:.2f} s |",
              flush=True)
    print(f"\n1-minute load average at end: {load.finish()['end']:.1f}")


if __name__ == "__main__":
    main()
