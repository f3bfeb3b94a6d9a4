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

from tf_ops import custom_call_check, dtypes, module_for_tf, platforms, versions

_PLATFORM_CHECK = str(jax.export.DisabledSafetyCheck.platform())
_CALL_TF_TARGET = "tf.call_tf_function"


# jax2tf.call_tf marks its calls with these effects (by class name: importing
# jax.experimental.jax2tf here would load it for every user). They only keep JAX from
# removing or reordering the call; the module itself holds the TF function, lowered to
# StableHLO, or calls it through `function_list` (call_tf_graph=True), so TF runs it.
_CALL_TF_EFFECTS = frozenset({"CallTfEffect", "CallTfOrderedEffect"})


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
      tf_functions: the TF concrete functions the module calls through the
        `tf.call_tf_function` custom call (`function_list` attr), by index.
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
    tf_functions: tuple = ()

    @property
    def platform_check_disabled(self) -> bool:
        return _PLATFORM_CHECK in self.disabled_checks


def _static_shape(aval) -> tuple[int | None, ...]:
    return tuple(d if isinstance(d, int) else None for d in aval.shape)


def tf_module_from_exported(exported: jax.export.Exported, *,
                            stablehlo_version: str | None = None,
                            checks: Sequence[module_for_tf.ModuleCheck] = (),
                            tf_functions: Sequence = ()) -> TfModule:
    """Prepares `exported` for TF: checks it can run here and re-serializes its module.

    Every custom call in the module is checked against our allowlist for the exported platforms
    (see `custom_call_check`), besides any `checks` given.

    Raises:
      custom_call_check.CustomCallNotAllowedError: a custom call TF cannot run (listing each
        target, where it comes from, and how to override).
      ValueError: the calling convention, device count, effects or platforms cannot run in the
        installed TensorFlow on this host (the message names both sides and the fix).

    Example:
        >>> exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> tf_module = tf_module_from_exported(exp)
        >>> call(tf_module, [tf.ones(3)])
    """
    versions.check_calling_convention_supported(exported.calling_convention_version)
    if exported.nr_devices != 1:
        raise ValueError(
            f"'{exported.fun_name}' was exported for {exported.nr_devices} devices; XlaCallModule "
            f"in TF runs single-device modules here. Fix: export without a multi-device mesh.")
    effects = [e for e in list(exported.ordered_effects) + list(exported.unordered_effects)
               if type(e).__name__ not in _CALL_TF_EFFECTS]
    if effects:
        raise ValueError(
            f"'{exported.fun_name}' has effects {effects} (e.g. host callbacks or debug prints) "
            f"that TensorFlow cannot run. Fix: remove jax.debug/io_callback calls before export.")
    disabled = tuple(str(c) for c in exported.disabled_safety_checks)
    platforms.check_runnable_here(exported.platforms, _PLATFORM_CHECK in disabled)
    target = stablehlo_version or versions.tf_stablehlo_version()
    allowlist_check = functools.partial(custom_call_check.check_custom_calls,
                                        platforms=exported.platforms,
                                        disabled_checks=exported.disabled_safety_checks)
    tf_calls_check = functools.partial(_check_tf_function_calls, name=exported.fun_name,
                                       n_functions=len(tf_functions))
    module = module_for_tf.module_bytes_for_tf(exported.mlir_module_serialized,
                                               stablehlo_version=target,
                                               checks=(allowlist_check, tf_calls_check, *checks))
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
        tf_functions=tuple(tf_functions),
    )


def _check_tf_function_calls(module, *, name: str, n_functions: int) -> None:
    """A module that calls TF functions (call_tf_graph=True) must come with them."""
    sites = [s for s in custom_call_check.find_custom_calls(module)
             if s.target == _CALL_TF_TARGET]
    if sites and not n_functions:
        raise ValueError(
            f"'{name}' calls TensorFlow functions through jax2tf.call_tf(..., "
            f"call_tf_graph=True) ({len(sites)} call(s)), but those functions are not part of "
            f"a serialized module. Fix: convert the JAX function with jax2tf_native.convert in "
            f"the process that runs it, or use call_tf without call_tf_graph=True (the TF "
            f"function is then compiled into the module).")


def _add_to_graph(tf_module: TfModule) -> list[str]:
    """Registers the module's TF functions where the op runs; returns their names."""
    for function in tf_module.tf_functions:
        # In a graph, the op finds the function in the graph's library (and a SavedModel saves
        # it from there); eagerly, in the context, where the concrete function already is.
        if not tf.executing_eagerly():
            function.add_to_graph()
    return [f.function_def.signature.name for f in tf_module.tf_functions]


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
        function_list=_add_to_graph(tf_module),
        # Modules are single-device here (checked above), so the partitioner choice is moot;
        # False keeps TF from expecting Shardy attributes JAX did not write.
        use_shardy_partitioner=False,
    )
    return list(outputs)
