"""`call_exported`: run a `jax.export.Exported` (or its serialized bytes) as a TF function."""
from __future__ import annotations

import re
from typing import Callable

import jax
import tensorflow as tf

from jax2tf_native import (artifact_sandbox, converter, export_cache, exporting, gradients,
                           lapack_rewrite, sandbox_server, declared_shapes, tf_args, prepared_export)
from jax2tf_native.errors import (ArgumentShapeError, ArgumentTypeError, ExportedModuleError,
                                  ModuleNotRunnableHereError)
from jax2tf_native.exported_node import ExportedFunction, leaf_specs
from tf_ops import custom_call_check, tf_targets, versions
from tf_ops.plain import lapack_kernels


def deserialize(exported_or_bytes, *, stablehlo_version: str | None = None
                ) -> jax.export.Exported:
    """An `Exported` from itself or from `Exported.serialize()` bytes, with a clear error.

    Bytes come from elsewhere, so they are first loaded in a sandbox child process
    (`artifact_sandbox`): deserialized, every module of the VJP chain parsed, verified, checked
    against the artifact's fields and re-serialized for `stablehlo_version` (default: the
    installed TF's). Corrupt bytes raise `ExportedModuleError` and never reach this process's
    parsers; an `Exported` object is returned as is (it is checked when it is prepared for TF).

    Raises:
      ExportedModuleError: the bytes are truncated, corrupt, or not from `Exported.serialize()`.

    Example:
        >>> import numpy as np
        >>> blob = jax.export.export(jax.jit(jax.numpy.cos))(np.zeros(3, np.float32)).serialize()
        >>> deserialize(blob).fun_name
        'cos'
    """
    if isinstance(exported_or_bytes, jax.export.Exported):
        return exported_or_bytes
    if not isinstance(exported_or_bytes, (bytes, bytearray, memoryview)):
        raise TypeError(f"call_exported expects a jax.export.Exported or the bytes of "
                        f"Exported.serialize(), got {type(exported_or_bytes).__name__}.")
    blob = bytes(exported_or_bytes)
    artifact_sandbox.check_serialized(blob, stablehlo_version or versions.tf_stablehlo_version())
    try:
        return sandbox_server.deserialize_artifact(blob)
    except Exception as e:  # the sandbox read the same bytes; kept as a second line of defence
        raise ExportedModuleError(
            f"Could not deserialize the {len(blob)} bytes as a jax.export.Exported "
            f"({type(e).__name__}: {str(e)[:200]}). The bytes are truncated, corrupt, or not from "
            f"Exported.serialize(). Fix: pass the complete output of "
            f"jax.export.export(...)(...).serialize().") from None


def _op_error_summary(e: tf.errors.OpError) -> str:
    """TF's first message line, without its `{{function_node ...}}` prefix or MLIR notes."""
    text = e.message.strip().splitlines()
    first = re.sub(r"^\{\{[^}]*\}\}\s*", "", text[0] if text else type(e).__name__)
    return first[:300]


def call_exported(exported_or_bytes, *, with_gradient: bool = True,
                  stablehlo_version: str | None = None,
                  target_tf: str | None = None, rewrite_lapack: bool = True,
                  enable_xla: bool = True) -> Callable:
    """Returns a TF-callable running an exported JAX function, without its Python source.

    Args:
      exported_or_bytes: a `jax.export.Exported`, or the bytes of `Exported.serialize()`.
      with_gradient: True: TF gradients use the artifact's own VJP (`Exported.vjp()`, present
        when serialized with `vjp_order >= 1`; a gradient request fails clearly otherwise).
        False adds `PreventGradient` to the outputs.
      stablehlo_version: for experts: the StableHLO version to write; default the target TF's.
      target_tf: the TensorFlow version that will run it, "2.17" ... "2.21" (default: the
        installed TF). The module is re-serialized for that TF's StableHLO version; an artifact
        whose calling convention is newer than that TF runs (JAX 0.10 writes 10, TF 2.17-2.19
        run up to 9) is wrapped in a new export at the older convention (`Exported.call` inside
        `jax.export`), which needs the installed JAX to write that convention.
      rewrite_lapack: True (default): a CPU module's jaxlib LAPACK custom calls
        (`lapack_sgetrf_ffi`, ...), which TF cannot run, are replaced by portable StableHLO
        functions with the same results (`jax2tf_native.lapack_rewrite`); the returned
        function's `lapack_rewritten` lists them. False leaves the module as it is. With
        `enable_xla=False` the calls TF has kernels for (potrf, trsm, syevd/heevd, gesdd) are
        kept and run on those kernels (`Cholesky`, ...; `tf_ops.plain.lapack_kernels`).
      enable_xla: True (default): one XlaCallModule op. False: the artifact's module (after
        the LAPACK rewrite) and its VJPs run as ordinary TF ops, as `convert(...,
        enable_xla=False)` does; an op with no exact lowering raises `PlainLoweringError` here.

    Returns:
      A function taking TF tensors in the exported pytree structure (args and kwargs) and
      returning TF tensors in the exported result structure.

    Raises:
      ExportedModuleError: the bytes are corrupt, or the module cannot run in this TensorFlow.
      CustomCallNotAllowedError: the module holds a custom call TF cannot run and that could
        not be rewritten (the message names the target, its source line and why).
      TargetTfError: the module cannot run in `target_tf` (the message names why and the fix).
      PlainLoweringError: with `enable_xla=False`, an op with no exact plain-TF lowering (a
        NotImplementedError naming the op, its dtypes and source line).

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> blob = jax.export.export(jax.jit(jnp.cos))(np.zeros(3, np.float32)).serialize()
        >>> cos_tf = call_exported(blob)
        >>> cos_tf(tf.zeros(3)).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    plain = not converter.check_enable_xla(enable_xla)
    target = tf_targets.resolve(target_tf)
    stablehlo_version = tf_targets.target_stablehlo_version(target, stablehlo_version)
    # Plain graphs run the LAPACK calls TF has kernels for on those kernels (lapack_kernels).
    rewrite = lapack_rewrite.rewrite_exported(
        deserialize(exported_or_bytes, stablehlo_version=stablehlo_version),
        enabled=rewrite_lapack, keep=lapack_kernels.TARGETS if plain else ())
    # A module whose main is dynamic where the artifact declares static shapes (JAX's own
    # back-compat data) is refined to the declared shapes, as XlaCallModule would.
    exported = exporting.exported_for_target(
        declared_shapes.refined_to_declared_shapes(rewrite.exported), target)
    try:
        prepared = prepared_export.prepare(exported, leaf_specs(exported),
                                     stablehlo_version=stablehlo_version, target=target,
                                     plain=plain)
    except custom_call_check.CustomCallNotAllowedError as e:
        raise lapack_rewrite.with_failures(e, rewrite.failures) from None
    node = ExportedFunction(exported, prepared, stablehlo_version, target, plain=plain)
    checked = prepared_export.CheckedSignatures(export_cache.DEFAULT_CACHE_SIZE)

    def run(values, asserts):
        return gradients.call(node, values, asserts, with_gradient)

    def call(*args, **kwargs):
        leaves, treedef = tf_args.flatten_args(args, kwargs)
        if treedef != exported.in_tree:
            raise ArgumentTypeError(
                f"'{exported.fun_name}' was exported for arguments structured as "
                f"{exported.in_tree}, but was called with {treedef}. Fix: pass (args, kwargs) "
                f"with the exported structure.")
        eager = tf.executing_eagerly()
        key = tuple((leaf.shape, leaf.dtype) for leaf in leaves)
        if checked.node(key) is None:
            values, asserts = checked.check(key, leaves, node)
        else:
            values, asserts = [leaf.value for leaf in leaves], []
        if not eager:
            return jax.tree_util.tree_unflatten(exported.out_tree, run(values, asserts))
        try:
            outs = run(values, asserts)
        except (ArgumentShapeError, ModuleNotRunnableHereError):
            raise  # ours, also tf.errors.OpError subclasses (as the peer's): already clear
        except tf.errors.OpError as e:
            # The arguments passed our checks, so TF failing to refine or compile the module
            # means the artifact is broken (e.g. a corrupt constant that still verifies).
            raise ExportedModuleError(
                f"TensorFlow could not run '{exported.fun_name}' on inputs "
                f"{[tuple(k[0]) for k in key]}: {_op_error_summary(e)}. The artifact is corrupt, "
                f"or its module disagrees with its declared shapes. Fix: re-export the function "
                f"and copy the complete bytes.") from None
        return jax.tree_util.tree_unflatten(exported.out_tree, outs)

    call.exported = exported
    call.lapack_rewritten = rewrite.rewritten_targets
    return call
