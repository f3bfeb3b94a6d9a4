"""`save_exported`: a `jax.export` artifact (no Python source) as a SavedModel, through `save`."""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
from jax2tf_native import arg_specs, lapack_rewrite
from saved_model_tools import manifest
from saved_model_tools.write import references
from saved_model_tools.write.saved_model import save
from tf_ops import custom_call_check
from tf_ops.plain import lapack_kernels


def save_exported(export_dir: str | os.PathLike, exported_or_bytes, *, params: Any = None,
                  example_args: Sequence[Any] | None = None,
                  input_names: Sequence[str] | None = None,
                  output_names: Sequence[str] | None = None, with_gradient: bool = True,
                  gradient_mode: str = "recompute", jit_compile: bool | None = None,
                  overwrite: bool = False,
                  progress: Callable[[str], None] | None = None,
                  stablehlo_version: str | None = None,
                  trainable: Any = None,
                  target_tf: str | None = None,
                  rewrite_lapack: bool = True, enable_xla: bool = True) -> manifest.Manifest:
    """Writes a `jax.export` artifact (an `Exported` or its serialized bytes) as a SavedModel.

    No Python source of the model is needed: the artifact is called through
    `Exported.call`, its symbolic input shapes become the signature's polymorphic shapes.

    Args:
      export_dir: the SavedModel directory.
      exported_or_bytes: a `jax.export.Exported` or the bytes of `Exported.serialize()`. It must
        take positional arguments (after an optional params pytree; arrays or pytrees of
        arrays, whose leaves become inputs named by key path) and no keyword arguments.
      params: when given, the artifact's first argument, saved as tf.Variables; the remaining
        arguments are the signature's inputs.
      example_args: example inputs (after params) for the reference data; default random
        inputs of the exported shapes (batch 1 and 3 for a symbolic leading dimension).
      input_names, output_names, jit_compile, overwrite, progress: as for `save`.
      stablehlo_version, trainable, enable_xla: as for `save` (polymorphic constraints and the
        linalg lowering are already in the artifact).
      with_gradient: keep gradients; needs an artifact serialized with `vjp_order >= 1`.
      gradient_mode: as for `save`.
      target_tf: as for `save`. The artifact is called inside the new export (as for any
        `save_exported`), so the outer module gets the target's calling convention and the
        whole is serialized for the target's StableHLO version.
      rewrite_lapack: as for `jax2tf_native.call_exported`: True (default) replaces a CPU
        artifact's LAPACK custom calls by portable StableHLO functions (`inspect` lists them
        as "LAPACK calls rewritten"); False keeps them (TF then cannot run the model).

    Example:
        >>> import tempfile
        >>> params = {"w": np.ones((3, 2), np.float32)}
        >>> x_spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("(b, 3)"), np.float32)
        >>> model = jax.jit(lambda p, x: x @ p["w"])
        >>> blob = jax.export.export(model)(params, x_spec).serialize(vjp_order=1)
        >>> record = save_exported(tempfile.mkdtemp() + "/model/1", blob, params=params,
        ...                        input_names=["x"])
        >>> [(t.name, t.shape) for t in record.signature("serving_default").inputs]
        [('x', (None, 3))]
    """
    # Plain graphs run the LAPACK calls TF has kernels for on those kernels (lapack_kernels).
    rewrite = lapack_rewrite.rewrite_exported(
        jax2tf_native.deserialize(exported_or_bytes), enabled=rewrite_lapack,
        keep=lapack_kernels.TARGETS if enable_xla is False else ())
    exported = rewrite.exported
    args_tree, kwargs_tree = jax.tree_util.tree_unflatten(exported.in_tree, exported.in_avals)
    if kwargs_tree:
        raise ValueError(f"'{exported.fun_name}' takes keyword arguments {sorted(kwargs_tree)}; "
                         f"a serving signature takes positional inputs. Fix: export a wrapper "
                         f"that takes them positionally.")
    if with_gradient and not exported.has_vjp():
        raise ValueError(f"'{exported.fun_name}' carries no VJP, so its SavedModel cannot keep "
                         f"gradients. Fix: serialize with Exported.serialize(vjp_order=1), or "
                         f"pass with_gradient=False.")
    input_avals = list(args_tree[1:] if params is not None else args_tree)
    if params is not None:
        want = jax.tree_util.tree_structure(args_tree[0])
        got = jax.tree_util.tree_structure(params)
        if want != got:
            raise ValueError(f"params has structure {got}, but '{exported.fun_name}' takes "
                             f"{want} as its first argument. Fix: pass the params it was "
                             f"exported with.")
    specs = [jax.tree.map(lambda a: arg_specs.shape_spec(a.shape), avals)
             for avals in input_avals]
    if example_args is None:
        example_args = [jax.tree.map(_example_for, avals) for avals in input_avals]
    takes_params = params is not None
    if params is None:
        fn = lambda unused_params, *args: exported.call(*args)
        params = {}
    else:
        fn = lambda p, *args: exported.call(p, *args)
    fn.__name__ = exported.fun_name if exported.fun_name.isidentifier() else "exported"
    fn = _with_exported_shardings(fn, exported, takes_params)
    try:
        return save(export_dir, fn, params, example_args, polymorphic_shapes=specs,
                    input_names=input_names, output_names=output_names,
                    with_gradient=with_gradient, gradient_mode=gradient_mode,
                    platforms=exported.platforms, jit_compile=jit_compile, overwrite=overwrite,
                    progress=progress, stablehlo_version=stablehlo_version, trainable=trainable,
                    target_tf=target_tf, enable_xla=enable_xla)
    except custom_call_check.CustomCallNotAllowedError as e:
        raise lapack_rewrite.with_failures(e, rewrite.failures) from None


def _with_exported_shardings(fn: Callable, exported, takes_params: bool) -> Callable:
    """`fn` under a jit declaring the artifact's shardings, for a multi-device artifact.

    `Exported.call` of an N-device module must be traced where N devices are in context; the
    artifact's own (abstract-mesh) shardings give that context, and `convert` repeats them on
    every module it exports, so the SavedModel keeps them.
    """
    if exported.nr_devices == 1:
        return fn
    declared = [s for s in exported.in_shardings_jax(None) + exported.out_shardings_jax(None)
                if s is not None]
    if not declared:
        return fn  # nothing declared: Exported.call explains what it needs
    mesh = abstract = declared[0].mesh
    if len(jax.devices()) >= exported.nr_devices:
        # A concrete mesh also lets JAX run it for the reference outputs.
        devices = np.array(jax.devices()[:exported.nr_devices]).reshape(abstract.axis_sizes)
        mesh = jax.sharding.Mesh(devices, abstract.axis_names, axis_types=abstract.axis_types)
    args, _ = jax.tree_util.tree_unflatten(exported.in_tree, exported.in_shardings_jax(mesh))
    in_shardings = tuple(args) if takes_params else ({},) + tuple(args)
    out_shardings = jax.tree_util.tree_unflatten(exported.out_tree,
                                                 exported.out_shardings_jax(mesh))
    return jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings)


def _example_for(aval) -> np.ndarray:
    """Deterministic example input for an exported input: symbolic dimensions of size 2."""
    shape = [d if isinstance(d, int) else 2 for d in aval.shape]
    spec = tf.TensorSpec(shape, tf.dtypes.as_dtype(aval.dtype))
    return references.random_inputs([spec], batch=shape[0] if shape else 1, seed=0)[0]
