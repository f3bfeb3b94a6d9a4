"""Compatibility module: the portable linear algebra lives in :mod:`jax2tf_native.linalg`.

Kept so that ``from jax2tf_native import linalg_portable`` and
``linalg_portable.export_scope(...)`` keep working; see the package for the design note.

Example:
    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from jax2tf_native import linalg_portable
    >>> with linalg_portable.export_scope(platforms=("cpu",)) as extra:
    ...     exported = jax.export.export(jax.jit(jnp.linalg.inv), platforms=("cpu",),
    ...                                  **extra)(np.eye(3, dtype=np.float32))
    >>> [t for t in linalg_portable.custom_call_targets(exported) if t.startswith("lapack_")]
    []
"""

from jax2tf_native.linalg import (PORTABLE_CUSTOM_CALL_TARGETS, NonPortableLinalgError,
                                  check_module_portable, custom_call_targets, export_scope,
                                  portable_lowering_rules)

__all__ = [
    "NonPortableLinalgError",
    "PORTABLE_CUSTOM_CALL_TARGETS",
    "check_module_portable",
    "custom_call_targets",
    "export_scope",
    "portable_lowering_rules",
]
