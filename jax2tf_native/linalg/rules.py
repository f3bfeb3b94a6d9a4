"""The portable rule table and the export scope that hands it to ``jax.export.export``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import jax.numpy as jnp
from jax import lax
from jax.interpreters import mlir

from jax2tf_native import _jax_internals
from jax2tf_native.linalg.cholesky import _cholesky_rule, _triangular_solve_rule
from jax2tf_native.linalg.eigh import _eigh_rule
from jax2tf_native.linalg.errors import raise_non_portable
from jax2tf_native.linalg.lu import _lu_rule
from jax2tf_native.linalg.qr import (_geqrf_rule, _householder_product_rule, _ormqr_rule,
                                     _qr_rule)
from jax2tf_native.linalg.qr_pivoted import _geqp3_rule
from jax2tf_native.linalg.svd import _svd_rule
from jax2tf_native.linalg.tridiagonal import _tridiagonal_rule
from jax2tf_native.linalg.tridiagonal_solve import _tridiagonal_solve_rule

_KNOWN_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")

# ---------------------------------------------------------------------------
# Primitives with no portable lowering: fail while exporting.

_NO_PORTABLE_FORM = {
    "eig": "the general (non-symmetric) eigendecomposition exists only as "
           "LAPACK geev in jaxlib; XLA has no expander for it",
    "schur": "the Schur decomposition exists only as LAPACK gees in jaxlib "
             "(this also covers sqrtm and funm)",
    "hessenberg": "Hessenberg reduction exists only as LAPACK gehrd in jaxlib",
}


def _is_empty(aval) -> bool:
    return any(isinstance(d, int) and d == 0 for d in aval.shape)


def _non_portable_rule(name: str):
    def rule(ctx, *args, **params):
        del params
        if all(_is_empty(aval) for aval in ctx.avals_out):
            # Nothing to compute (e.g. eigvals of a 0x0 matrix): the results are empty arrays.
            return mlir.lower_fun(lambda *_: [jnp.zeros(a.shape, a.dtype) for a in ctx.avals_out],
                                  multiple_results=True)(ctx, *args)
        raise_non_portable(ctx, name, _NO_PORTABLE_FORM[name])
    rule.__name__ = f"_{name}_not_portable_rule"
    return rule


# ---------------------------------------------------------------------------
# Rule table and the export scope.

_rules_lock = threading.Lock()
_rules: tuple[tuple[Any, Any], ...] | None = None


def portable_lowering_rules() -> tuple[tuple[Any, Any], ...]:
    """Returns the ``(primitive, lowering rule)`` pairs of the portable lowering.

    The tuple is built once and then always the same object, so JAX's lowering
    cache (which keys on it) is reused across exports.

    Example:
        >>> rules = portable_lowering_rules()
        >>> exported = jax.export.export(
        ...     jax.jit(jnp.linalg.inv), platforms=("cpu",),
        ...     _override_lowering_rules=rules)(np.eye(3, dtype=np.float32))
    """
    global _rules
    with _rules_lock:
        if _rules is None:
            lin = lax.linalg
            table = [
                (lin.cholesky_p, _cholesky_rule),
                (lin.triangular_solve_p, _triangular_solve_rule),
                (lin.lu_p, _lu_rule),
                (lin.qr_p, _qr_rule),
                (lin.householder_product_p, _householder_product_rule),
                (lin.ormqr_p, _ormqr_rule),
                (lin.eigh_p, _eigh_rule),
                (lin.svd_p, _svd_rule),
                (lin.tridiagonal_solve_p, _tridiagonal_solve_rule),
                (lin.tridiagonal_p, _tridiagonal_rule),
            ]
            table += [(getattr(lin, f"{name}_p"), _non_portable_rule(name))
                      for name in ("eig", "schur", "hessenberg")]
            # Not exported publicly by JAX: see _jax_internals.
            table += [(_jax_internals.geqrf_p, _geqrf_rule),
                      (_jax_internals.geqp3_p, _geqp3_rule)]
            _rules = tuple(table)
        return _rules


@contextlib.contextmanager
def export_scope(platforms: Sequence[str] = ("cpu",)
                 ) -> Iterator[dict[str, Any]]:
    """Scope in which ``jax.export.export`` lowers linear algebra portably.

    Yields the extra keyword arguments to pass to ``jax.export.export``. No JAX
    state is changed, so the scope is thread-safe and nothing leaks out of it:
    exports made without the yielded arguments, and ordinary ``jax.jit`` use,
    keep JAX's native (LAPACK) lowering.

    Args:
        platforms: the platforms the export targets (lower-case JAX names). Used
            to validate the request; the rules apply to every exported platform.

    Yields:
        ``{"_override_lowering_rules": ...}`` for ``jax.export.export``.

    Raises:
        ValueError: for an unknown platform name.
        NonPortableLinalgError: (from the export) for primitives with no portable
            lowering, such as ``eig`` or ``schur``.

    Example:
        >>> with export_scope(platforms=("cpu",)) as extra:
        ...   exported = jax.export.export(jax.jit(jnp.linalg.solve),
        ...                                platforms=("cpu",), **extra)(a, b)
        >>> check_module_portable(exported)
    """
    if isinstance(platforms, str):
        platforms = (platforms,)
    bad = [p for p in platforms if str(p).lower() not in _KNOWN_PLATFORMS]
    if bad or not platforms:
        raise ValueError(
            f"export_scope: unknown platform(s) {bad or list(platforms)}; expected "
            f"a non-empty subset of {_KNOWN_PLATFORMS}. Fix: pass the same "
            "lower-case platform names given to jax.export.export.")
    yield {_jax_internals.OVERRIDE_LOWERING_RULES_KWARG: portable_lowering_rules()}

