"""Finds every `stablehlo.custom_call` in a module and checks it against our allowlist.

Run on a parsed module (inside `jax.interpreters.mlir.make_ir_context()`) before it is written for
TF. A target fails when it is not on `custom_call_allowlist.ALLOWLIST`, or when it is on the list
but TF's XLA cannot execute it on one of the platforms the module is exported for. Each failing
target can be let through with `jax.export.DisabledSafetyCheck.custom_call(target)`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Sequence

import jax
import jax.extend.mlir
import jax.interpreters.mlir as jax_mlir
from jax.extend.mlir import ir

from tf_ops import mlir_walk, source_lines
from tf_ops import platforms as tf_platforms
from tf_ops.custom_call_allowlist import ALLOWLIST_BY_TARGET

# JAX's own check treats custom_call("ALL") as "allow every target"; we keep that meaning.
_ALLOW_ALL = "ALL"
# How many source locations to print per failing target; the rest are counted.
_MAX_LOCATIONS_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class CustomCallSite:
    """One `stablehlo.custom_call` op in a module.

    Attributes:
      target: its `call_target_name`.
      location: where it comes from, e.g. 'jit(f)/sin at model.py:12'; inside a private
        function also the call that reaches it, e.g. 'geqrf (in @qr called from jit(f)/jit(qr)
        at model.py:12)'.
      function: the `sym_name` of the enclosing `func.func` ("" when at module level).
    """
    target: str
    location: str
    function: str


@dataclasses.dataclass(frozen=True)
class RejectedTarget:
    """A target that failed the check, with every place it occurs and why it failed."""
    target: str
    reason: str
    sites: tuple[CustomCallSite, ...]


class CustomCallNotAllowedError(ValueError):
    """The module contains custom calls that TF cannot be relied on to run.

    Attributes:
      rejected: one `RejectedTarget` per failing target, in order of first occurrence.
    """

    def __init__(self, message: str, rejected: Sequence[RejectedTarget]):
        super().__init__(message)
        self.rejected = tuple(rejected)


# Bounds the walk up the call graph when a site is inside a private function.
_MAX_CALL_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class _CallSite:
    caller: str
    location: str


def _with_call_chain(site: CustomCallSite, calls: dict[str, _CallSite]) -> CustomCallSite:
    # JAX lowers a nested jit once into a private function whose ops carry only the op name;
    # the user's file and line are on the func.call that reaches it, so follow the callers.
    chain, function, seen = [], site.function, set()
    while function in calls and function not in seen and len(chain) < _MAX_CALL_DEPTH:
        seen.add(function)
        call = calls[function]
        chain.append(f"@{function} called from {call.location}")
        if "at " in call.location:
            break
        function = call.caller
    if not chain:
        return site
    return dataclasses.replace(site, location=f"{site.location} (in {'; '.join(chain)})")


def find_custom_calls(module: ir.Module) -> list[CustomCallSite]:
    """Every `stablehlo.custom_call` in `module`, in program order.

    Walks all operations, including private functions and the regions of ops such as
    `stablehlo.while`, `stablehlo.case` and reducers. A site inside a private function gets the
    location of the call that reaches it appended (that is where the user's source line is).

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> exp = jax.export.export(jax.jit(jnp.linalg.qr))(np.zeros((3, 3), np.float32))
        >>> with jax_mlir.make_ir_context():
        ...     module = jax.extend.mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        ...     [s.target for s in find_custom_calls(module)]
        ['lapack_sgeqrf_ffi', 'lapack_sorgqr_ffi']
    """
    found: list[CustomCallSite] = []
    calls: dict[str, _CallSite] = {}
    for op, function, target in mlir_walk.walk(module.operation, with_functions=True):
        if target is not None:
            found.append(CustomCallSite(target, source_lines.describe(op.location), function))
        elif op.name == "func.call":
            calls.setdefault(mlir_walk.string_attribute(op, "callee"),
                             _CallSite(function, source_lines.describe(op.location)))
    return [_with_call_chain(site, calls) for site in found]


def custom_call_targets(exported: jax.export.Exported) -> list[str]:
    """The distinct custom-call targets of an exported module, sorted.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> exp = jax.export.export(jax.jit(jnp.linalg.qr))(np.zeros((3, 3), np.float32))
        >>> custom_call_targets(exp)
        ['lapack_sgeqrf_ffi', 'lapack_sorgqr_ffi']
    """
    with jax_mlir.make_ir_context():
        module = jax.extend.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        return sorted({site.target for site in find_custom_calls(module)})


def canonical_disabled_checks(checks: Iterable[Any] | None, keyword: str = "disabled_checks"
                              ) -> tuple[jax.export.DisabledSafetyCheck, ...]:
    """Validates `disabled_checks`: each must be a `jax.export.DisabledSafetyCheck`; errors say
    `keyword`, the name the caller used (e.g. "native_serialization_disabled_checks"). The one
    validation: `convert` takes its option through here, and so does `check_custom_calls`.

    Example:
        >>> canonical_disabled_checks(jax.export.DisabledSafetyCheck.platform())
        (platform,)
    """
    if checks is None:
        return ()
    if isinstance(checks, (str, jax.export.DisabledSafetyCheck)):
        checks = (checks,)
    result = []
    for check in checks:
        if not isinstance(check, jax.export.DisabledSafetyCheck):
            raise TypeError(
                f"{keyword} entries must be jax.export.DisabledSafetyCheck values, got "
                f"{check!r}. Fix: e.g. {keyword}=[jax.export.DisabledSafetyCheck."
                f"custom_call('my_target')] or [jax.export.DisabledSafetyCheck.platform()].")
        result.append(check)
    return tuple(result)


def _allowed_by_disabled_checks(disabled_checks: Iterable[Any] | None) -> set[str]:
    allowed = set()
    for check in canonical_disabled_checks(disabled_checks):
        target = check.is_custom_call()
        if target is not None:
            allowed.add(target)
    return allowed


def rejection_reason(target: str, platforms: Sequence[str]) -> str | None:
    """Why `target` may not be exported for `platforms`, or None when it may.

    A listed target is checked only on the requested platforms where JAX can emit it (a
    multi-platform module holds `lapack_*` only in its CPU branch); if it is emitted for none of
    them, on all requested platforms.

    Example:
        >>> rejection_reason("Qr", ["cpu"]) is None
        True
    """
    entry = ALLOWLIST_BY_TARGET.get(target)
    if entry is None:
        return ("not on the allowlist: JAX gives no compatibility guarantee for this target, so "
                "a model saved today may not load with a later JAX/TF")
    relevant = [p for p in platforms if p in entry.platforms] or list(platforms)
    not_runnable = [p for p in relevant if not entry.runs_in_tf_on(p)]
    if not not_runnable:
        return None
    return (f"stable in JAX (emitted by {entry.emitted_by}), but TensorFlow's XLA cannot execute "
            f"it on {', '.join(not_runnable)}. {entry.note}")


def check_custom_calls(module: ir.Module, *, platforms: Sequence[str] | str,
                       disabled_checks: Sequence[jax.export.DisabledSafetyCheck] = ()) -> None:
    """Raises `CustomCallNotAllowedError` if `module` has a custom call we cannot stand behind.

    Args:
      module: the parsed StableHLO module (call inside its MLIR context).
      platforms: the platforms the module is exported for, e.g. `Exported.platforms`.
      disabled_checks: `jax.export.DisabledSafetyCheck` values; `custom_call(t)` lets target `t`
        through (`custom_call("ALL")` lets all through, as in `jax.export`).

    Raises:
      CustomCallNotAllowedError: listing each offending target with its source locations, the
        reason, and the `disabled_checks` override.
      ValueError: `platforms` names an unknown platform.
      TypeError: a `disabled_checks` entry is not a `DisabledSafetyCheck`.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> exp = jax.export.export(jax.jit(jnp.linalg.qr))(np.zeros((3, 3), np.float32))
        >>> with jax_mlir.make_ir_context():
        ...     module = jax.extend.mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        ...     check_custom_calls(module, platforms=("cpu",))
        Traceback (most recent call last):
        ...
        tf_ops.custom_call_check.CustomCallNotAllowedError: The module (platforms cpu) contains 2 custom-call target(s) that TensorFlow cannot be relied on to run:
        ...
        >>> allow = [jax.export.DisabledSafetyCheck.custom_call(t)
        ...          for t in ("lapack_sgeqrf_ffi", "lapack_sorgqr_ffi")]
        >>> with jax_mlir.make_ir_context():
        ...     module = jax.extend.mlir.deserialize_portable_artifact(exp.mlir_module_serialized)
        ...     check_custom_calls(module, platforms=("cpu",), disabled_checks=allow)
    """
    platforms = tf_platforms.canonical_platforms(
        platforms, fix="Fix: pass the platforms the module was exported for, e.g. "
                       "Exported.platforms.")
    overridden = _allowed_by_disabled_checks(disabled_checks)
    if _ALLOW_ALL in overridden:
        return
    sites_by_target: dict[str, list[CustomCallSite]] = {}
    for site in find_custom_calls(module):
        if site.target not in overridden:
            sites_by_target.setdefault(site.target, []).append(site)
    rejected = []
    for target, sites in sites_by_target.items():
        reason = rejection_reason(target, platforms)
        if reason is not None:
            rejected.append(RejectedTarget(target, reason, tuple(sites)))
    if rejected:
        raise CustomCallNotAllowedError(_message(rejected, platforms), rejected)


def _message(rejected: Sequence[RejectedTarget], platforms: Sequence[str]) -> str:
    lines = [f"The module (platforms {', '.join(platforms)}) contains {len(rejected)} custom-call "
             f"target(s) that TensorFlow cannot be relied on to run:"]
    for item in rejected:
        lines.append(f"  - '{item.target}': {item.reason}")
        for site in item.sites[:_MAX_LOCATIONS_SHOWN]:
            shown = site.function and f"@{site.function}" not in site.location
            where = f" (in function @{site.function})" if shown else ""
            lines.append(f"      at {site.location}{where}")
        if len(item.sites) > _MAX_LOCATIONS_SHOWN:
            lines.append(f"      ... and {len(item.sites) - _MAX_LOCATIONS_SHOWN} more")
    overrides = ", ".join(
        f"jax.export.DisabledSafetyCheck.custom_call({item.target!r})" for item in rejected)
    lines.append(
        f"Fix: avoid the operation(s) above, or, if you will only run the result where these "
        f"targets are available (e.g. in JAX), override with disabled_checks=[{overrides}].")
    return "\n".join(lines)
