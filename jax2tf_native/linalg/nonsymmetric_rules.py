"""Lowering rules for ``eig_p``, ``schur_p`` and ``hessenberg_p`` (portable).

Each rule lowers the JAX implementation in ``eig.py``, ``schur.py`` or
``hessenberg.py`` with ``mlir.lower_fun``: plain StableHLO loops, slices and
matmuls, which TF's XLA runs (no custom calls). The matrix size must be static (checked by the caller in
``linalg_portable``); batch dimensions may be symbolic.
"""

from __future__ import annotations

import functools

from jax.interpreters import mlir

from jax2tf_native.linalg import eig as _eig
from jax2tf_native.linalg import hessenberg as _hessenberg
from jax2tf_native.linalg import schur as _schur

__all__ = ["eig_rule", "hessenberg_rule", "schur_rule"]


def eig_rule(ctx, a, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs=False, implementation=None, **_):
    """``eig_p``: eigenvalues, then left and/or right eigenvectors (geev order)."""
    # The algorithm is the only portable one; derivative flags only matter to the JVP.
    del enable_eigvec_derivs, implementation
    impl = functools.partial(
        _eig.eig, compute_left_eigenvectors=compute_left_eigenvectors,
        compute_right_eigenvectors=compute_right_eigenvectors)
    return mlir.lower_fun(lambda x: list(impl(x)), multiple_results=True)(ctx, a)


def schur_rule(ctx, a, *, compute_schur_vectors, sort_eig_vals=False,
               select_callable=None, **_):
    """``schur_p``: ``T`` (real Schur form for real input) and optionally ``Z``."""
    del select_callable  # unused by JAX's CPU lowering as well
    if sort_eig_vals:
        # JAX's own CPU lowering refuses this too (LAPACK gees' sort is not wired up).
        raise NotImplementedError(
            "The sort feature of LAPACK's gees routine is not implemented.")

    def impl(x):
        t, z = _schur.schur(x, compute_schur_vectors=compute_schur_vectors)
        return [t, z] if compute_schur_vectors else [t]

    return mlir.lower_fun(impl, multiple_results=True)(ctx, a)


def hessenberg_rule(ctx, a):
    """``hessenberg_p``: LAPACK gehrd's packed ``(a, taus)``."""
    return mlir.lower_fun(lambda x: list(_hessenberg.hessenberg(x)),
                          multiple_results=True)(ctx, a)
