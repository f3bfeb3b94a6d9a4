"""Checks that an exported module calls no LAPACK/solver kernel that TF cannot run."""

from __future__ import annotations

import re

import jax

from jax2tf_native.linalg.errors import NonPortableLinalgError
from tf_ops import custom_call_check

#: Custom-call targets that TF's XLA expands itself on CPU (measured, TF 2.21).
PORTABLE_CUSTOM_CALL_TARGETS = frozenset(
    {"Qr", "ProductOfElementaryHouseholderReflectors", "Eigh"})

# Linear-algebra targets whose handlers live only in jaxlib (LAPACK on CPU,
# cuSOLVER/hipSOLVER/cuSPARSE and small CUDA/HIP kernels on GPU), or that TF's
# CPU XLA does not expand (LuDecomposition). Other custom calls are not this
# module's business (tf_ops has the full allowlist).
_NON_PORTABLE_TARGET = re.compile(
    r"^(lapack_|LuDecomposition$|cusolver_|hipsolver_|cusparse_gtsv|hipsparse_gtsv"
    r"|(cu|hip)_lu_pivots_to_permutation|(cu|hip)_cholesky_update)")


# ---------------------------------------------------------------------------
# Module check.

def custom_call_targets(exported: jax.export.Exported) -> list[str]:
    """Returns the sorted, distinct custom-call targets of an exported module.

    The one scanner of the project (`tf_ops.custom_call_check.custom_call_targets`), kept under
    this name for `linalg_portable` users.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> exported = jax.export.export(jax.jit(jnp.linalg.qr))(np.eye(3, dtype=np.float32))
        >>> custom_call_targets(exported)
        ['lapack_sgeqrf_ffi', 'lapack_sorgqr_ffi']
    """
    return custom_call_check.custom_call_targets(exported)


def check_module_portable(exported: jax.export.Exported) -> None:
    """Raises if the module still calls LAPACK/solver kernels TF cannot run.

    Args:
        exported: the result of ``jax.export.export``.

    Raises:
        NonPortableLinalgError: naming the offending custom-call targets.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> from jax2tf_native.linalg import export_scope
        >>> with export_scope(platforms=("cpu",)) as extra:
        ...     exported = jax.export.export(jax.jit(jnp.linalg.qr), platforms=("cpu",),
        ...                                  **extra)(np.eye(3, dtype=np.float32))
        >>> check_module_portable(exported)  # silent when portable
    """
    bad = [t for t in custom_call_targets(exported)
           if _NON_PORTABLE_TARGET.match(t)]
    if bad:
        raise NonPortableLinalgError(
            None, exported.platforms,
            f"it calls jaxlib-only custom call target(s) {bad}, which TF's XLA "
            "has no handler for (expected only portable targets such as "
            f"{sorted(PORTABLE_CUSTOM_CALL_TARGETS)})",
            "Fix: export inside linalg_portable.export_scope() and pass the "
            "yielded keyword arguments to jax.export.export (convert(..., "
            "linalg='portable')).")
