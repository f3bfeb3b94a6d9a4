"""Rewrites jaxlib's LAPACK custom calls in an existing CPU `jax.export` artifact.

A module exported with plain `jax.export` on CPU calls LAPACK through custom calls
(`lapack_sgetrf_ffi`, ...) that TF's XLA has no handler for. `rewrite_exported` replaces each
by a call of a private portable StableHLO function with the same results (see `adapters`,
`surgery`), so that the artifact runs in TF. A module without such calls is returned as the
same object (its bytes untouched); a call that cannot be rewritten is left in place, and the
custom-call check then rejects it with the target and its source line, as before.

Example:
    >>> import jax.numpy as jnp, numpy as np
    >>> exported = jax.export.export(jax.jit(jnp.linalg.qr))(np.eye(3, dtype=np.float32))
    >>> result = rewrite_exported(exported)
    >>> result.rewritten_targets
    ('lapack_sgeqrf_ffi', 'lapack_sorgqr_ffi')
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection

import jax
import jax.interpreters.mlir as jax_mlir
from jax.extend import mlir as jax_extend_mlir

from jax2tf_native import _jax_internals
from jax2tf_native.errors import first_line
from jax2tf_native.lapack_rewrite import surgery
from jax2tf_native.lapack_rewrite.targets import all_targets, routine_of
from tf_ops import custom_call_check, module_for_tf, module_verify, versions

__all__ = ["RewriteResult", "rewrite_exported", "with_failures", "all_targets", "routine_of"]

logger = logging.getLogger("jax2tf_native")


@dataclasses.dataclass(frozen=True)
class RewriteResult:
    """What `rewrite_exported` did.

    Attributes:
      exported: the artifact to run (the input itself when nothing was rewritten).
      rewritten_targets: the distinct targets replaced by portable functions, sorted.
      failures: (target, reason) of call sites left in place.
    """
    exported: jax.export.Exported
    rewritten_targets: tuple[str, ...] = ()
    failures: tuple[surgery.RewriteFailure, ...] = ()


def _rewrite_bytes(serialized: bytes, keep: frozenset[str]
                   ) -> tuple[bytes | None, list[str], list]:
    with jax_mlir.make_ir_context() as context:
        context.emit_error_diagnostics = False
        try:
            module = jax_extend_mlir.deserialize_portable_artifact(serialized)
        except Exception:  # unreadable bytes: left to module_for_tf, which names the fix
            return None, [], []
        if not surgery.has_lapack_calls(module, keep):
            return None, [], []
        try:
            module_verify.verify_module(module)
        except module_verify.ModuleVerifyError:
            return None, [], []  # left as it is: module_for_tf reports it, as for any module
        try:
            rewritten, failures = surgery.rewrite_module(module, keep)
            if not rewritten:
                return None, [], failures
            module_verify.verify_module(module)
            blob = bytes(jax_extend_mlir.serialize_portable_artifact(
                module, versions.tf_stablehlo_version(), module_for_tf.uses_shardy(module)))
        except Exception as e:  # noqa: BLE001 -- the original module stays; its calls are named
            # Whatever went wrong, the artifact runs as it was given, and the custom-call check
            # rejects its LAPACK calls with their targets, source lines and this reason.
            reason = (f"the rewrite failed ({type(e).__name__}: "
                      f"{first_line(e)[:200]})")
            return None, [], [surgery.RewriteFailure(t, reason)
                              for t in surgery.lapack_targets(module, keep)]
    return blob, rewritten, failures


def rewrite_exported(exported: jax.export.Exported, *, enabled: bool = True,
                     keep: Collection[str] = ()) -> RewriteResult:
    """`exported` with its LAPACK custom calls replaced by portable StableHLO functions.

    Only modules lowered for CPU can hold them. The VJP chain (`exported.vjp()`) is rewritten
    the same way when it is asked for. The calling convention and every other field are kept.

    Args:
      exported: the artifact.
      enabled: False returns `exported` unchanged (`rewrite_lapack=False` of the callers).
      keep: targets left as they are: the plain lowering (`enable_xla=False`) runs
        `tf_ops.plain.lapack_kernels.TARGETS` on TF's own kernels.

    Returns:
      A `RewriteResult`.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> exported = jax.export.export(jax.jit(jnp.linalg.solve))(
        ...     np.eye(3, dtype=np.float32), np.ones(3, np.float32))
        >>> exported.mlir_module().count("custom_call @lapack_")
        3
        >>> rewrite_exported(exported).exported.mlir_module().count("custom_call @lapack_")
        0
    """
    # MLIR bytecode stores strings as they are: without "lapack_" there is no target to find,
    # and the module is not parsed at all.
    if (not enabled or "cpu" not in exported.platforms
            or b"lapack_" not in exported.mlir_module_serialized):
        return RewriteResult(exported)
    keep = frozenset(keep)
    blob, rewritten, failures = _rewrite_bytes(exported.mlir_module_serialized, keep)
    for failure in failures:
        logger.warning("jax2tf_native: could not rewrite %s to portable StableHLO: %s",
                       failure.target, failure.reason)
    if blob is None:
        return RewriteResult(exported, (), tuple(failures))
    new = _jax_internals.exported_with_module(
        exported, blob, lambda vjp: rewrite_exported(vjp, keep=keep).exported)
    return RewriteResult(new, tuple(sorted(set(rewritten))), tuple(failures))


def with_failures(error: custom_call_check.CustomCallNotAllowedError,
                  failures) -> custom_call_check.CustomCallNotAllowedError:
    """`error` with, for each LAPACK target it rejects, why the rewrite left it in place."""
    reasons = {}
    for failure in failures:
        reasons.setdefault(failure.target, failure.reason)
    notes = [f"  '{target}' was not rewritten to portable StableHLO: {reason}"
             for target, reason in reasons.items()
             if any(r.target == target for r in error.rejected)]
    if not notes:
        return error
    lines = str(error).splitlines()
    # Before the closing "Fix:" line, so that the fix stays last.
    return custom_call_check.CustomCallNotAllowedError(
        "\n".join([*lines[:-1], *notes, *lines[-1:]]), error.rejected)
