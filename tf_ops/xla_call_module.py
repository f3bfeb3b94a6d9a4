"""Builds the one `XlaCallModule` TF op that runs an exported JAX module.

`TfModule` is everything the op needs, computed once per `jax.export.Exported`; `call` builds the
op from it, eagerly or in a graph. This is the only place that knows the op's attributes, and
the one place that decides which ops run a module: with `plain=True` (`enable_xla=False`) the
module runs as ordinary TF ops instead (`tf_ops.plain`), with no XLA op, sharding op or
platform guard around it.

Modules that this host cannot run (see `host_can_run`) still build: in a graph the op is preceded by
a guard that fails with our message only where the module cannot run, so a graph traced on a
CPU machine for TPU serving saves and serves.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as _tfxla

from tf_ops import custom_call_check, dtypes, host_can_run, module_for_tf, module_verify
from tf_ops import platforms, shardings, tf_targets, versions
from tf_ops.plain import PlainModule, module_from_exported

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
      module: the StableHLO portable artifact, serialized for the consuming TF's version
        (empty with `plain`: no XlaCallModule op reads it).
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
      fun_name: the exported function's name, for messages.
      nr_devices: the number of devices the module was exported for.
      multi_device_ops: ops that need a partitioned multi-device run (`host_can_run`).
      in_shardings: JAX `HloSharding` (or None: unspecified) of every flat input.
      out_shardings: JAX `HloSharding` (or None) of every flat output.
      use_shardy: whether the module holds Shardy ops (`use_shardy_partitioner` attr).
      problem_here: why TF on this host cannot run the module, with the fix; None if it can.
      plain: the module as ordinary TF ops (`enable_xla=False`), run by `call` instead of the
        XlaCallModule op; None: the op.
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
    fun_name: str = "fun"
    nr_devices: int = 1
    multi_device_ops: tuple[str, ...] = ()
    in_shardings: tuple = ()
    out_shardings: tuple = ()
    use_shardy: bool = False
    problem_here: str | None = None
    plain: PlainModule | None = dataclasses.field(default=None, compare=False)

    @property
    def platform_check_disabled(self) -> bool:
        return _PLATFORM_CHECK in self.disabled_checks


def _static_shape(aval) -> tuple[int | None, ...]:
    return tuple(d if isinstance(d, int) else None for d in aval.shape)


def tf_module_from_exported(exported: jax.export.Exported, *,
                            stablehlo_version: str | None = None,
                            checks: Sequence[module_for_tf.ModuleCheck] = (),
                            tf_functions: Sequence = (),
                            in_shardings: Sequence | None = None,
                            out_shardings: Sequence | None = None,
                            target: tf_targets.TfTarget | None = None,
                            written_here: bool = False, plain: bool = False) -> TfModule:
    """Prepares `exported` for TF: checks TF can run it somewhere and re-serializes its module.

    With `target` (a measured TF version, see `tf_targets`) the module must also run there: its
    calling convention must be one that TF runs, and it is written in that TF's StableHLO
    version unless `stablehlo_version` says otherwise.

    Every custom call in the module is checked against our allowlist for the exported platforms
    (see `custom_call_check`), besides any `checks` given. Whether this host can run it is
    recorded in `problem_here`, and raised only when the op would run (see `call`).

    Args:
      exported: the module.
      stablehlo_version: the consuming TF's StableHLO version (None: the installed TF's).
      checks: more checks run on the parsed module.
      in_shardings, out_shardings: JAX `HloSharding` (or None) per flat input / output, put on
        XlaSharding ops around the call in graphs; None: no sharding ops.
      written_here: the module bytes come from `jax.export` in this process (see
        `module_for_tf.module_bytes_for_tf`).
      plain: run the module as ordinary TF ops (`enable_xla=False`): every op is checked here
        (`tf_ops.plain.module_from_exported`) instead of the XlaCallModule checks; no
        module bytes are written (`module` is empty), `target` and `checks` do not apply, and
        the module needs no TF host platform.

    Raises:
      custom_call_check.CustomCallNotAllowedError: a custom call TF cannot run (listing each
        target, where it comes from, and how to override).
      module_verify.ModuleVerifyError: the module fails MLIR's verifier, or its `main` disagrees
        with the artifact's fields (a ValueError).
      tf_targets.TargetTfError: `target` cannot run the module (calling convention, or an op
        that its StableHLO version lacks); the message names it, the oldest TF that runs it
        and the fix.
      ValueError: the calling convention or effects cannot run in the installed TensorFlow (the
        message names both sides and the fix).
      tf_ops.plain.PlainLoweringError: with `plain`, an op (or the module) that cannot be
        lowered exactly to plain TF ops (a NotImplementedError naming op, dtype, source line).

    Example:
        >>> exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> tf_module = tf_module_from_exported(exp)
        >>> call(tf_module, [tf.zeros(3)])[0].numpy()
        array([0., 0., 0.], dtype=float32)
    """
    module_verify.check_fields(exported)
    if target is not None and not plain:
        target.check_calling_convention(exported.calling_convention_version,
                                        f"'{exported.fun_name}'")
    versions.check_calling_convention_supported(exported.calling_convention_version)
    effects = [e for e in list(exported.ordered_effects) + list(exported.unordered_effects)
               if type(e).__name__ not in _CALL_TF_EFFECTS]
    if effects:
        raise ValueError(
            f"'{exported.fun_name}' has effects {effects} (e.g. host callbacks or debug prints) "
            f"that TensorFlow cannot run. Fix: remove jax.debug/io_callback calls before export.")
    disabled = tuple(str(c) for c in exported.disabled_safety_checks)
    target_stablehlo = (stablehlo_version or (target.stablehlo_version if target else None)
                        or versions.tf_stablehlo_version())
    allowlist_check = functools.partial(custom_call_check.check_custom_calls,
                                        platforms=exported.platforms,
                                        disabled_checks=exported.disabled_safety_checks)
    signature_check = functools.partial(module_verify.check_main_signature, exported=exported)
    tf_calls_check = functools.partial(_check_tf_function_calls, name=exported.fun_name,
                                       n_functions=len(tf_functions))
    multi_device, shardy = [], []

    def record(module) -> None:
        multi_device.extend(host_can_run.multi_device_ops(module))
        shardy.append(module_for_tf.uses_shardy(module))

    if plain:
        # No XlaCallModule op will read the module: nothing is written for a TF version (whose
        # StableHLO version or calling convention does not apply to plain ops); the lowering
        # reads and checks the module itself.
        lowered = module_from_exported(exported, len(tf_functions))
        module, shardy = b"", [False]
    else:
        lowered = None
        module = module_for_tf.module_bytes_for_tf(
            exported.mlir_module_serialized, stablehlo_version=target_stablehlo,
            checks=(signature_check, allowlist_check, tf_calls_check, record, *checks),
            target_tf=target.version if target else None, written_here=written_here)
    n_in, n_out = len(exported.in_avals), len(exported.out_avals)
    return TfModule(
        module=module,
        stablehlo_version=target_stablehlo,
        calling_convention_version=exported.calling_convention_version,
        platforms=tuple(p.upper() for p in exported.platforms),
        disabled_checks=disabled,
        kept_var_idx=tuple(exported.module_kept_var_idx),
        in_dtypes=tuple(dtypes.to_tf_dtype(a.dtype) for a in exported.in_avals),
        out_dtypes=tuple(dtypes.to_tf_dtype(a.dtype) for a in exported.out_avals),
        out_shapes=tuple(_static_shape(a) for a in exported.out_avals),
        tf_functions=tuple(tf_functions),
        fun_name=exported.fun_name,
        nr_devices=exported.nr_devices,
        multi_device_ops=tuple(multi_device),
        in_shardings=tuple(in_shardings) if in_shardings is not None else (None,) * n_in,
        out_shardings=tuple(out_shardings) if out_shardings is not None else (None,) * n_out,
        # As the module was lowered (its ops say so, whatever JAX's setting is now).
        use_shardy=shardy[0],
        # Plain TF ops run on every TF device, whatever platform the module was lowered for.
        problem_here=None if plain else host_can_run.problem_here(
            exported.fun_name, exported.platforms, exported.nr_devices, tuple(multi_device),
            _PLATFORM_CHECK in disabled),
        plain=lowered,
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


def call(tf_module: TfModule, args_flat: Sequence[tf.Tensor],
         after: Sequence = ()) -> list[tf.Tensor]:
    """Builds (in a graph) or runs (eagerly) the XlaCallModule op on all flat inputs.

    `args_flat` holds one tensor per exported input, already of the exported dtypes; the inputs
    the module dropped are skipped here. In a graph, inputs and outputs with a declared sharding
    pass through XlaSharding ops, and a module this host cannot run gets a guard that fails with
    `problem_here` when executed on a platform where the module cannot run.

    Eagerly, callers check `problem_here` first (`jax2tf_native.prepared_export.call_flat` raises
    `ModuleNotRunnableHereError`). In a graph the op runs after the ops `after` (e.g. run-time
    shape asserts), without identity copies of its inputs.

    A module with `plain` runs as ordinary TF ops instead, after `after` too: no XlaCallModule,
    XlaSharding or guard op.
    """
    eager = tf.executing_eagerly()
    kept = [args_flat[i] for i in tf_module.kept_var_idx]
    if tf_module.plain is not None:
        with tf.control_dependencies(list(after)):
            return tf_module.plain.call(kept)
    guards = []
    if not eager:
        kept = shardings.shard_all(kept, [tf_module.in_shardings[i]
                                          for i in tf_module.kept_var_idx],
                                   shardy=tf_module.use_shardy)
        if tf_module.problem_here:
            guards.append(_guard(tf_module))
    with tf.control_dependencies(list(after) + guards):
        outputs = _call_module(tf_module, kept)
    if not eager:
        outputs = shardings.shard_all(outputs, tf_module.out_shardings, shardy=tf_module.use_shardy)
    return list(outputs)


def _call_module(tf_module: TfModule, kept: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    outputs = _call_module_op(tf_module, kept)
    if tf_module.nr_devices > 1 and outputs and not tf.executing_eagerly():
        op = outputs[0].op
        # Private TF: Operation._set_attr is the only way to add a node attribute after the
        # op is built (attributes starting with "_" are kept by SavedModels and ignored by
        # kernels); pinned by tests/tf_ops/test_shardings.py.
        op._set_attr(host_can_run.DEVICES_ATTR, tf.compat.v1.AttrValue(i=tf_module.nr_devices))
        op._set_attr(host_can_run.MULTI_DEVICE_OPS_ATTR, tf.compat.v1.AttrValue(
            list=tf.compat.v1.AttrValue.ListValue(
                s=[name.encode() for name in tf_module.multi_device_ops])))
    return outputs


def _call_module_op(tf_module: TfModule, kept: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    return _tfxla.call_module(
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
        use_shardy_partitioner=tf_module.use_shardy,
    )


@functools.cache
def _platform_probe() -> TfModule:
    """A module for every platform returning the index in JAX_PLATFORMS of the one it runs on."""
    branches = {p: (lambda i=i: jnp.int32(i)) for i, p in enumerate(platforms.JAX_PLATFORMS)}
    exported = jax.export.export(jax.jit(lambda: jax.lax.platform_dependent(**branches)),
                                 platforms=platforms.JAX_PLATFORMS)()
    return tf_module_from_exported(exported)


def _guard(tf_module: TfModule) -> tf.Operation:
    """An op failing with `problem_here` unless the graph runs on a platform that may run it.

    The platform is asked at run time from a tiny module lowered for every platform, so a graph
    traced here and served on a TPU passes the guard there. Inside `jit_compile=True` XLA drops
    asserts; there XlaCallModule's own platform check reports instead.
    """
    may_run = host_can_run.platforms_that_may_run(tf_module.platforms)
    index = _call_module(_platform_probe(), [])[0]
    allowed = tf.constant([platforms.JAX_PLATFORMS.index(p) for p in may_run], tf.int32)
    ok = tf.reduce_any(tf.equal(index, allowed))
    return tf.debugging.Assert(ok, [tf.constant(tf_module.problem_here)],
                               name="jax2tf_native_runnable_here")
