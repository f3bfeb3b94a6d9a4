"""Flattens TF-side arguments into leaves that know their path, shape and JAX dtype.

Leaves may be `tf.Tensor`s (eager or symbolic), `tf.Variable`s, numpy arrays or Python scalars.
"""
from __future__ import annotations

import collections.abc
import dataclasses
from typing import Any

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native import _jax_internals
from jax2tf_native.errors import ArgumentTypeError, JaxTransformationError
from tf_ops import dtypes


@dataclasses.dataclass(frozen=True)
class ArgLeaf:
    """One flat argument.

    Attributes:
      path: where it sits in the call, e.g. "args[0]['w']" (used in every error message).
      value: the `tf.Tensor` to pass to TF (Variables are read, numpy converted).
      shape: the static TF shape, None for dimensions unknown while tracing a tf.function.
      dtype: the numpy dtype of `value`.
    """
    path: str
    value: tf.Tensor
    shape: tuple[int | None, ...]
    dtype: np.dtype


def path_str(root: str, key_path) -> str:
    """"args" + ((SequenceKey(0), DictKey('w'))) -> "args[0]['w']"."""
    return root + jax.tree_util.keystr(key_path)


_TRANSFORMATIONS = {"BatchTracer": "jax.vmap", "JVPTracer": "jax.grad/jax.jvp",
                    "LinearizeTracer": "jax.grad/jax.linearize",
                    "DynamicJaxprTracer": "jax.jit (or convert, export, lax control flow)"}


def reject_transformation(transformation: str) -> None:
    """Raises `JaxTransformationError` for a call inside a JAX transformation that passed no
    tracer (a converted function of no traced argument, e.g. `convert(lambda: ...)()` under
    `jax.vmap`, or a nested `convert`), as jax2tf detects it from JAX's trace state."""
    raise JaxTransformationError(
        f"{JaxTransformationError.PEER_PHRASE}: a function made by convert was called while "
        f"JAX traces {transformation} (no argument of the call is a JAX tracer, but its result "
        f"would be used by JAX); it runs TensorFlow ops on TF values and cannot be traced by "
        f"JAX (jit, vmap, grad, or a nested convert). Fix: inside JAX code call the original "
        f"JAX function instead of its converted version; to call TensorFlow code from JAX, "
        f"wrap it with jax2tf_native.call_tf (jax.experimental.jax2tf.call_tf).")


def _reject_tracer(path: str, leaf: jax.core.Tracer) -> None:
    transformation = _TRANSFORMATIONS.get(type(leaf).__name__,
                                          f"a JAX transformation ({type(leaf).__name__})")
    raise JaxTransformationError(
        f"{JaxTransformationError.PEER_PHRASE}: {path} is a JAX tracer ({leaf.aval.str_short()}) from {transformation}: a function "
        f"made by convert runs TensorFlow ops on TF values and cannot be traced by JAX (jit, "
        f"vmap, grad, or a nested convert). Fix: inside JAX code call the original JAX "
        f"function instead of its converted version; to call TensorFlow code from JAX, wrap "
        f"it with jax2tf_native.call_tf (jax.experimental.jax2tf.call_tf).")


def _to_tensor(path: str, leaf: Any) -> tf.Tensor:
    if isinstance(leaf, (tf.Tensor, tf.Variable)):
        return tf.convert_to_tensor(leaf)
    if isinstance(leaf, jax.core.Tracer):
        _reject_tracer(path, leaf)
    if leaf is None or isinstance(leaf, (str, bytes)) or not (
            isinstance(leaf, (np.ndarray, np.generic, int, float, complex, bool))
            or hasattr(leaf, "__array__")):
        # "Argument ... is not a valid JAX type" is jax2tf's (JAX's) phrase for this case.
        raise ArgumentTypeError(
            f"Argument '{leaf!s:.60}' of type {type(leaf)} is not a valid JAX type: "
            f"{path} is {type(leaf).__name__} ({leaf!r:.60}), not an array. Fix: pass a "
            f"tf.Tensor, tf.Variable, numpy array or Python number there (a None leaf in a "
            f"pytree counts as an empty node only if JAX sees it so; remove it otherwise).")
    array = np.asarray(leaf)
    if isinstance(leaf, (int, float, complex)) and not isinstance(leaf, bool):
        # Python scalars follow JAX's default (32-bit unless x64 is enabled) like jnp.asarray.
        array = np.asarray(jax.numpy.asarray(leaf))
    try:
        return tf.convert_to_tensor(array)
    except (TypeError, ValueError) as e:
        raise ArgumentTypeError(f"{path} of dtype {array.dtype} cannot become a TF tensor: {e}. "
                                f"Fix: pass a numeric array.") from None


def unwrap_tf_containers(tree: Any) -> Any:
    """Turns TF's trackable wrappers (the `_DictWrapper`/`ListWrapper` that `tf.Module` puts
    around dict and list attributes) into builtin dicts and lists, which JAX knows as pytrees."""
    if isinstance(tree, (tf.Tensor, tf.Variable, np.ndarray)):
        return tree
    from_tf = type(tree).__module__.startswith("tensorflow")
    if isinstance(tree, collections.abc.Mapping) and (from_tf or type(tree) is dict):
        return {k: unwrap_tf_containers(v) for k, v in tree.items()}
    if isinstance(tree, list) and (from_tf or type(tree) is list):
        return [unwrap_tf_containers(v) for v in tree]
    if type(tree) is tuple:
        return tuple(unwrap_tf_containers(v) for v in tree)
    return tree


def flatten_args(args: tuple, kwargs: dict) -> tuple[list[ArgLeaf], Any]:
    """Flattens (args, kwargs) into leaves and the pytree definition of the pair."""
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path((args, kwargs))
    paths = [path_str("args" if key_path[0].idx == 0 else "kwargs", key_path[1:])
             for key_path, _ in leaves_with_path]
    if _jax_internals.inside_jax_transformation():
        # Before any leaf is converted: under a JAX trace even `1.` becomes a tracer there.
        for path, (_, leaf) in zip(paths, leaves_with_path):
            if isinstance(leaf, jax.core.Tracer):
                _reject_tracer(path, leaf)
        reject_transformation("a JAX transformation (jax.jit, jax.vmap, jax.grad, or a nested "
                              "convert)")
    result = []
    for path, (_, leaf) in zip(paths, leaves_with_path):
        value = _to_tensor(path, leaf)
        try:
            dtype = dtypes.to_numpy_dtype(value.dtype)
        except TypeError as e:
            raise ArgumentTypeError(f"{path}: {e}") from None
        shape = tuple(value.shape.as_list()) if value.shape.rank is not None else None
        if shape is None:
            raise ArgumentTypeError(
                f"{path} has unknown rank while tracing a tf.function. Fix: give the "
                f"tf.function an input_signature with a known rank (see "
                f"jax2tf_native.input_signature).")
        result.append(ArgLeaf(path, value, shape, dtype))
    return result, treedef
