"""The portable rule table and the export scope that hands it to ``jax.export.export``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from jax import lax

from jax2tf_native import _jax_internals
from jax2tf_native.linalg.cholesky import _cholesky_rule, _triangular_solve_rule
from jax2tf_native.linalg import nonsymmetric_rules, plain_rules
from jax2tf_native.linalg.eigh import _eigh_rule
from jax2tf_native.linalg.lu import _lu_rule
from jax2tf_native.linalg.qr import (_geqrf_rule, _householder_product_rule, _ormqr_rule,
                                     _qr_rule)
from jax2tf_native.linalg.qr_pivoted import _geqp3_rule
from jax2tf_native.linalg.svd import _svd_rule
from jax2tf_native.linalg.tridiagonal import _tridiagonal_rule
from jax2tf_native.linalg.tridiagonal_solve import _tridiagonal_solve_rule
from tf_ops import platforms as tf_platforms

# ---------------------------------------------------------------------------
# Rule table and the export scope.

_rules_lock = threading.Lock()
_rules: tuple[tuple[Any, Any], ...] | None = None


def portable_lowering_rules() -> tuple[tuple[Any, Any], ...]:
    """Returns the ``(primitive, lowering rule)`` pairs of the portable lowering.

    The tuple is built once and then always the same object, so JAX's lowering
    cache (which keys on it) is reused across exports.

    The check is on the module's custom-call targets, not on its text: the text
    also holds debug locations, which JAX takes from the first trace of a shared
    nested function (jnp.linalg's `_lu_solve`), so after a LAPACK rewrite (or
    any trace from a file whose name holds "lapack_") they name that file.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jax2tf_native.linalg.module_check import custom_call_targets
        >>> rules = portable_lowering_rules()
        >>> exported = jax.export.export(
        ...     jax.jit(jnp.linalg.inv), platforms=("cpu",),
        ...     _override_lowering_rules=rules)(np.eye(3, dtype=np.float32))
        >>> [t for t in custom_call_targets(exported) if t.startswith("lapack_")]
        []
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
            # eig, schur, hessenberg: also with a symbolic matrix size (rolled loops).
            table += [(getattr(lin, f"{name}_p"), getattr(nonsymmetric_rules, f"{name}_rule"))
                      for name in ("eig", "schur", "hessenberg")]
            # Not exported publicly by JAX: see _jax_internals.
            table += [(_jax_internals.geqrf_p, _geqrf_rule),
                      (_jax_internals.geqp3_p, _geqp3_rule)]
            _rules = tuple(table)
        return _rules


@contextlib.contextmanager
def export_scope(platforms: Sequence[str] = ("cpu",), *, plain: bool = False
                 ) -> Iterator[dict[str, Any]]:
    """Scope in which ``jax.export.export`` lowers linear algebra portably.

    Yields the extra keyword arguments to pass to ``jax.export.export``. No JAX
    state is changed, so the scope is thread-safe and nothing leaks out of it:
    exports made without the yielded arguments, and ordinary ``jax.jit`` use,
    keep JAX's native (LAPACK) lowering.

    Args:
        platforms: the platforms the export targets (lower-case JAX names). Used
            to validate the request (``tf_ops.platforms``' one list; "gpu" means
            "cuda"); the rules apply to every exported platform.
        plain: the module will run as plain TF ops (`enable_xla=False`): a CPU-only export
            then keeps JAX's CPU lowering where TF has kernels
            (``plain_rules.plain_lowering_rules``).

    Yields:
        ``{"_override_lowering_rules": ...}`` for ``jax.export.export``.

    Raises:
        ValueError: for an unknown platform name.
        NonPortableLinalgError: (from the export) for what has no portable
            lowering (the error says what and the fix).

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jax2tf_native.linalg import check_module_portable
        >>> a, b = np.eye(3, dtype=np.float32), np.ones(3, np.float32)
        >>> with export_scope(platforms=("cpu",)) as extra:
        ...   exported = jax.export.export(jax.jit(jnp.linalg.solve),
        ...                                platforms=("cpu",), **extra)(a, b)
        >>> check_module_portable(exported)
    """
    names = tf_platforms.canonical_platforms(
        platforms, fix="Fix: pass the platform names given to jax.export.export.")
    rules = portable_lowering_rules()
    if plain and names == ("cpu",):
        rules = plain_rules.plain_lowering_rules(rules)
    yield {_jax_internals.OVERRIDE_LOWERING_RULES_KWARG: rules}

