"""Builds the one `XlaCallModule` TF op that runs an exported JAX module.

`TfModule` is everything the op needs, computed once per `jax.export.Exported`; `call` builds the
op from it, eagerly or in a graph. This is the only place that knows the op's attributes.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as _tfxla

from tf_ops import custom_call_check, dtypes, module_for_tf, module_verify, platforms, versions

_PLATFORM_CHECK = str(jax.export.DisabledSafetyCheck.platform())


@dataclasses.dataclass(frozen=True)
class TfModule:
    """An exported module made ready for TensorFlow's `XlaCallModule`.

    Attributes:
      module: the StableHLO portable artifact, serialized for the consuming TF's version.
      stablehlo_version: the StableHLO version `module` was written in.
      calling_convention_version: the XlaCallModule `version` attribute.
      platforms: upper-case XLA platform names the module was lowered for (`platforms` attr).
      disabled_checks: `str` of each `jax.export.DisabledSafetyCheck` (`disabled_checks` attr).
      kept_var_idx: indices of the flat inputs the module takes (JAX drops unused ones).
      in_dtypes: TF dtype of every flat input (kept or not).
      out_dtypes: TF dtype of every flat output (`Tout` attr).
      out_shapes: static shape of every flat output, None where symbolic (`Sout` attr).
    """
    module: bytes
    stablehlo_version: str
    calling_convention_version: int
    platforms: tuple[str, ...]
    disabled_checks: tuple[str, ...]
    kept_var_idx: tuple[int, ...]
    in_dtypes: tuple[tf.DType, ...]
    out_dtypes: tuple[tf.DType, ...]
    out_shapes: tuple[tuple[int | None, ...], ...]

    @property
    def platform_check_disabled(self) -> bool:
        return _PLATFORM_CHECK in self.disabled_checks


def _static_shape(aval) -> tuple[int | None, ...]:
    return tuple(d if isinstance(d, int) else None for d in aval.shape)


def tf_module_from_exported(exported: jax.export.Exported, *,
                            stablehlo_version: str | None = None,
                            checks: Sequence[module_for_tf.ModuleCheck] = ()) -> TfModule:
    """Prepares `exported` for TF: checks it can run here and re-serializes its module.

    Every custom call in the module is checked against our allowlist for the exported platforms
    (see `custom_call_check`), besides any `checks` given.

    Raises:
      custom_call_check.CustomCallNotAllowedError: a custom call TF cannot run (listing each
        target, where it comes from, and how to override).
      module_verify.ModuleVerifyError: the module fails MLIR's verifier, or its `main` disagrees
        with the artifact's fields (a ValueError).
      ValueError: the calling convention, device count, effects or platforms cannot run in the
        installed TensorFlow on this host (the message names both sides and the fix).

    Example:
        >>> exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> tf_module = tf_module_from_exported(exp)
        >>> call(tf_module, [tf.ones(3)])
    """
    module_verify.check_fields(exported)
    versions.check_calling_convention_supported(exported.calling_convention_version)
    if exported.nr_devices != 1:
        raise ValueError(
            f"'{exported.fun_name}' was exported for {exported.nr_devices} devices; XlaCallModule "
            f"in TF runs single-device modules here. Fix: export without a multi-device mesh.")
    if exported.ordered_effects or exported.unordered_effects:
        effects = list(exported.ordered_effects) + list(exported.unordered_effects)
        raise ValueError(
            f"'{exported.fun_name}' has effects {effects} (e.g. host callbacks or debug prints) "
            f"that TensorFlow cannot run. Fix: remove jax.debug/io_callback calls before export.")
    disabled = tuple(str(c) for c in exported.disabled_safety_checks)
    platforms.check_runnable_here(exported.platforms, _PLATFORM_CHECK in disabled)
    target = stablehlo_version or versions.tf_stablehlo_version()
    allowlist_check = functools.partial(custom_call_check.check_custom_calls,
                                        platforms=exported.platforms,
                                        disabled_checks=exported.disabled_safety_checks)
    signature_check = functools.partial(module_verify.check_main_signature, exported=exported)
    module = module_for_tf.module_bytes_for_tf(exported.mlir_module_serialized,
                                               stablehlo_version=target,
                                               checks=(signature_check, allowlist_check,
                                                       *checks))
    return TfModule(
        module=module,
        stablehlo_version=target,
        calling_convention_version=exported.calling_convention_version,
        platforms=tuple(p.upper() for p in exported.platforms),
        disabled_checks=disabled,
        kept_var_idx=tuple(exported.module_kept_var_idx),
        in_dtypes=tuple(dtypes.to_tf_dtype(a.dtype) for a in exported.in_avals),
        out_dtypes=tuple(dtypes.to_tf_dtype(a.dtype) for a in exported.out_avals),
        out_shapes=tuple(_static_shape(a) for a in exported.out_avals),
    )


def call(tf_module: TfModule, args_flat: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Builds (in a graph) or runs (eagerly) the XlaCallModule op on all flat inputs.

    `args_flat` holds one tensor per exported input, already of the exported dtypes; the inputs
    the module dropped are skipped here.
    """
    kept = [args_flat[i] for i in tf_module.kept_var_idx]
    outputs = _tfxla.call_module(
        kept,
        version=tf_module.calling_convention_version,
        module=tf_module.module,
        Tout=list(tf_module.out_dtypes),
        Sout=list(tf_module.out_shapes),
        platforms=list(tf_module.platforms),
        disabled_checks=list(tf_module.disabled_checks),
        # Tokens are not used from calling convention 9 on, and real ones are needed before.
        has_token_input_output=False,
        function_list=[],
        # Modules are single-device here (checked above), so the partitioner choice is moot;
        # False keeps TF from expecting Shardy attributes JAX did not write.
        use_shardy_partitioner=False,
    )
    return list(outputs)
