"""Exports a JAX function with the public `jax.export` API, for a TensorFlow consumer."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
from typing import Callable, Sequence

import jax

from jax2tf_native import _jax_internals, arg_shape_check, linalg_portable, prepared_export
from jax2tf_native import shardings as shardings_lib
from jax2tf_native.errors import ArgumentShapeError, first_line
from jax2tf_native.linalg import nonsymmetric_rules
from tf_ops import tf_targets, versions

logger = logging.getLogger("jax2tf_native")

# jax.export reads the calling-convention version from global JAX config; changing it for one
# export must not race with another thread's export.
_VERSION_LOCK = threading.Lock()


def negotiated_calling_convention_version(target_max: int | None = None) -> int:
    """The newest calling convention the installed JAX writes, the installed TF runs, and (when
    given) the target TF runs (`target_max`, from `tf_ops.tf_targets`)."""
    jax_version = jax.config.jax_export_calling_convention_version
    tf_max = versions.tf_maximum_calling_convention_version()
    if target_max is not None:
        tf_max = min(tf_max, target_max)
    if jax_version <= tf_max:
        return jax_version
    if tf_max < jax.export.minimum_supported_calling_convention_version:
        raise ValueError(
            f"The installed TensorFlow runs XlaCallModule calling conventions up to {tf_max}, "
            f"but the installed JAX writes versions "
            f"{jax.export.minimum_supported_calling_convention_version}.."
            f"{jax.export.maximum_supported_calling_convention_version}. Fix: upgrade "
            f"TensorFlow, or use an older JAX.")
    return tf_max


LINALG_MODES = ("portable", "native")


def check_linalg_mode(linalg: str) -> str:
    if linalg not in LINALG_MODES:
        raise ValueError(f"linalg must be one of {LINALG_MODES}, got {linalg!r}. 'portable' "
                         f"(default) lowers linear algebra to ops TF runs; 'native' keeps JAX's "
                         f"LAPACK custom calls (for modules run back in JAX).")
    return linalg


def export(fun: Callable, args_specs: tuple, kwargs_specs: dict, *,
           platforms: Sequence[str] | None,
           disabled_checks: Sequence[jax.export.DisabledSafetyCheck],
           linalg: str = "portable", shardings=None,
           max_calling_convention: int | None = None,
           plain: bool = False) -> jax.export.Exported:
    """`jax.export.export(jax.jit(fun))` at a calling convention the installed TF runs.

    With `linalg="portable"` linear algebra is lowered to StableHLO that TF's XLA runs (see
    `linalg_portable`); "native" keeps JAX's lowering (LAPACK custom calls on CPU). `plain`:
    the module will run as plain TF ops (`enable_xla=False`): a portable CPU export then keeps
    JAX's LAPACK calls for cholesky, triangular_solve, eigh and svd, which the plain lowering
    runs on TF's own kernels (`linalg.plain_lowering_rules`).
    `shardings` (a `shardings.FunctionShardings` of the flat `fun`) become the jit's in/out
    shardings; outputs past those it lists (residuals) are unspecified.
    `max_calling_convention` caps the calling convention further (a `target_tf`'s).

    Example:
        >>> import jax.numpy as jnp
        >>> exp = export(jnp.sin, (jax.ShapeDtypeStruct((3,), "float32"),), {},
        ...              platforms=None, disabled_checks=())
        >>> exp.in_avals
        (ShapedArray(float32[3]),)
    """
    version = negotiated_calling_convention_version(max_calling_convention)
    scope = (linalg_portable.export_scope(platforms=platforms or (jax.default_backend(),),
                                          plain=plain)
             if check_linalg_mode(linalg) == "portable" else contextlib.nullcontext({}))
    with scope as extra_export_kwargs:
        exporter = jax.export.export(_jit(fun, shardings), platforms=platforms,
                                     disabled_checks=tuple(disabled_checks),
                                     **extra_export_kwargs)
        try:
            if version == jax.config.jax_export_calling_convention_version:
                return exporter(*args_specs, **kwargs_specs)
            return _export_at_version(exporter, version, args_specs, kwargs_specs)
        except Exception as e:
            # (issue19sem) JAX itself cannot lower a 0x0 hessenberg: name it, not the MLIR type.
            if "invalid tensor dimension size" not in str(e):
                raise
            shape = nonsymmetric_rules.empty_hessenberg_operand(fun, args_specs, kwargs_specs)
            if shape is None:
                raise
            raise ArgumentShapeError(
                f"jax.lax.linalg.hessenberg got an operand of shape {shape}: its matrix size n "
                "(the last two axes) is 0, expected n >= 1. JAX itself cannot lower a 0x0 "
                "hessenberg (its taus output would have n - 1 = -1 entries). Fix: skip the call "
                "when n == 0, or use jax.scipy.linalg.hessenberg, which returns the empty "
                "matrix.") from e


def _jit(fun: Callable, shardings):
    if shardings is None:
        return jax.jit(fun)
    n_declared = len(shardings.outputs)

    @functools.wraps(fun)
    def declared_then_rest(*xs):
        # A pytree prefix: None leaves the outputs past the declared ones unspecified.
        outs = fun(*xs)
        return list(outs[:n_declared]), list(outs[n_declared:])

    return jax.jit(declared_then_rest, in_shardings=tuple(shardings.inputs),
                   out_shardings=(list(shardings.outputs), None))


def _export_at_version(exporter, version: int, args_specs, kwargs_specs):
    """Exports with JAX's calling-convention config set to `version` for this export only."""
    with _VERSION_LOCK:
        previous = jax.config.jax_export_calling_convention_version
        jax.config.update("jax_export_calling_convention_version", version)
        try:
            return exporter(*args_specs, **kwargs_specs)
        finally:
            jax.config.update("jax_export_calling_convention_version", previous)



@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How every module of one converted function is exported and prepared for TF.

    Attributes:
      platforms: lowering platforms, None for JAX's default backend.
      disabled_checks: `jax.export.DisabledSafetyCheck` values.
      stablehlo_version: the consuming TF's StableHLO version, None for the installed TF's.
      linalg: "portable" (linear algebra TF can run) or "native" (JAX's LAPACK lowering).
      target_tf: the measured TF version the modules are written for (`tf_ops.tf_targets`),
        None for the installed TF: it caps the calling convention, and gives the StableHLO
        version unless `stablehlo_version` is set.
      plain: every module (forward, residual forward, backward, VJPs) runs as ordinary TF ops
        (`enable_xla=False`) instead of XlaCallModule.
    """
    platforms: tuple[str, ...] | None = None
    disabled_checks: tuple[jax.export.DisabledSafetyCheck, ...] = ()
    stablehlo_version: str | None = None
    linalg: str = "portable"
    target_tf: tf_targets.TfTarget | None = None
    plain: bool = False


def export_prepared(fun: Callable, specs, options: ExportOptions, *,
                    constraints: Sequence[str] = (), shardings=None):
    """Exports flat `fun(*leaves)` for `specs` and prepares the module for TF.

    `shardings`: a `shardings.FunctionShardings` for `fun`'s inputs and leading outputs, or None.
    """
    logger.debug("jax2tf_native: exporting %s for %s", getattr(fun, "__name__", "fun"),
                 [f"{s.path}: {s.struct.dtype}[{', '.join(map(str, s.shape))}]" for s in specs])
    try:
        # jax2tf.call_tf(..., call_tf_graph=True) calls TF functions that travel with the op.
        with _jax_internals.collecting_call_tf_functions() as tf_functions:
            exported = export(fun, tuple(s.struct for s in specs), {},
                              platforms=options.platforms,
                              disabled_checks=options.disabled_checks, linalg=options.linalg,
                              shardings=shardings, plain=options.plain,
                              max_calling_convention=(options.target_tf.max_calling_convention
                                                      if options.target_tf else None))
    except ValueError as e:
        indivisible = shardings_lib.indivisible_dimension_error(e, specs)
        if indivisible is not None:
            raise indivisible from e
        if not str(e).startswith("Cannot solve for values of dimension variables"):
            raise
        raise arg_shape_check.unsolvable_error(specs, first_line(e)) from e
    return prepared_export.prepare(exported, specs, constraints=constraints,
                             stablehlo_version=options.stablehlo_version,
                             tf_functions=tuple(tf_functions),
                             target=options.target_tf, written_here=True, plain=options.plain)


def exported_for_target(exported: jax.export.Exported, target) -> jax.export.Exported:
    """`exported` itself when `target` (a `tf_ops.tf_targets.TfTarget`) runs its calling
    convention, else the artifact wrapped in a new export at the target's convention.

    An artifact's own module cannot be rewritten at another convention, but `Exported.call` can
    be exported again: the new module calls the artifact's module as a function, and only the
    outer calling convention (how XlaCallModule passes arguments and dimension values) changes.

    Raises:
      tf_ops.tf_targets.TargetTfError: the installed JAX cannot write the target's convention
        (the message names the fix).
    """
    if target is None or exported.calling_convention_version <= target.max_calling_convention:
        return exported
    version = negotiated_calling_convention_version(target.max_calling_convention)
    try:
        exporter = jax.export.export(jax.jit(exported.call), platforms=exported.platforms,
                                     disabled_checks=exported.disabled_safety_checks)
        args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, exported.in_avals)
        return _export_at_version(exporter, version, args, kwargs)
    except Exception as e:  # JAX raises several types; the fix is the same for all
        try:
            target.check_calling_convention(exported.calling_convention_version,
                                            f"'{exported.fun_name}'")
        except tf_targets.TargetTfError as error:
            raise tf_targets.TargetTfError(
                f"{error} (Wrapping it at calling convention {version} failed: "
                f"{type(e).__name__}: {first_line(e)[:200]})") from None
        raise
