"""Parameters as `tf.Variable`s named by their pytree path, so a SavedModel stores them in its
checkpoint (never as graph constants) and TF code can fine-tune them."""
from __future__ import annotations

import re
from typing import Any, Callable

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native.errors import ArgumentTypeError
from tf_ops import dtypes as tf_dtypes


def key_parts(key_path) -> list[str]:
    """[DictKey('dense'), SequenceKey(0), GetAttrKey('w')] -> ["dense", "0", "w"]."""
    return [str(_key_value(key)) for key in key_path]


def variable_name(key_path) -> str:
    """"params" + ['dense']['w'] -> "params/dense/w" (characters TF rejects become _)."""
    name = "/".join(["params", *key_parts(key_path)])
    return re.sub(r"[^A-Za-z0-9_./-]", "_", name)


def _is_choice(x) -> bool:
    return x is None or isinstance(x, bool)


def _key_value(key):
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return getattr(key, attr)
    return key


def trainable_leaves(params: Any, trainable: Any = None) -> list[bool | None]:
    """One choice per params leaf: True/False from `trainable`, None for "by dtype".

    Args:
      params: the parameter pytree.
      trainable: None (float and complex leaves train), a bool for all leaves, or a nested
        dict (lists by index) following params' keys with True, False or None where a choice
        covers a whole subtree, e.g. `{"params": True, "batch_stats": False}`. Keys left out
        are None.

    Raises:
      ValueError: `trainable` names a key params lacks, or holds something else than a bool.
    """
    leaves_with_path = jax.tree_util.tree_flatten_with_path(params)[0]
    if _is_choice(trainable):
        return [trainable] * len(leaves_with_path)
    used, choices = set(), []
    for key_path, _ in leaves_with_path:
        node, path = trainable, ()
        for key in key_path:
            if _is_choice(node):
                break
            key = _key_value(key)
            if isinstance(node, dict) and key in node:
                node, path = node[key], path + (key,)
            elif isinstance(node, (list, tuple)) and isinstance(key, int) and key < len(node):
                node, path = node[key], path + (key,)
            elif isinstance(node, dict):
                node = None
                break
            else:
                raise ValueError(f"trainable{''.join(f'[{k!r}]' for k in path)} is "
                                 f"{type(node).__name__}, but params continue with key {key!r}. "
                                 f"Fix: a dict following params' keys with True/False, e.g. "
                                 f"{{'params': True, 'batch_stats': False}}.")
        if not _is_choice(node):
            raise ValueError(f"trainable{''.join(f'[{k!r}]' for k in path)} must be True, False "
                             f"or None (params has a leaf there), got {node!r:.60}.")
        used.add(path)
        choices.append(node)
    for key_path, _ in jax.tree_util.tree_flatten_with_path(trainable, is_leaf=_is_choice)[0]:
        path = tuple(_key_value(k) for k in key_path)
        if path not in used and not _has_path(params, path):
            raise ValueError(f"trainable{jax.tree_util.keystr(key_path)} names no subtree of "
                             f"params (top-level keys: {_top_keys(params)}). Fix: use params' "
                             f"own keys, e.g. {{'params': True, 'batch_stats': False}}.")
    return choices


def _has_path(params, path: tuple) -> bool:
    """Whether params has the subtree `path` (possibly empty, e.g. no batch statistics)."""
    node = params
    for key in path:
        if hasattr(node, "keys") and key in node.keys():
            node = node[key]
        elif isinstance(node, (list, tuple)) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return False
    return True


def _top_keys(params) -> list:
    return sorted({str(_key_value(p[0])) for p, _ in
                   jax.tree_util.tree_flatten_with_path(params)[0] if p})


def to_variables(params: Any, trainable: Any = None, *,
                 on_variable: Callable[[tf.Variable], None] | None = None,
                 ) -> tuple[Any, list[tf.Variable]]:
    """Returns the params pytree with tf.Variable leaves, and the flat list of Variables.

    Float and complex leaves are trainable unless `trainable` (see `trainable_leaves`) says
    False for their subtree; integer and bool leaves never are (TF cannot step them).

    Each Variable is made from its leaf alone, one at a time, so the only memory this adds is
    the Variables (TF's own buffers; a CPU `jax.Array` leaf is even shared, not copied, until
    the Variable's first write) plus one leaf's transient copy. A leaf may also be a zero-argument
    function returning the array (e.g. `lambda: safetensors_file.get_tensor("w")`): it is
    called when its Variable is made and its result dropped right after, so parameters that
    do not fit in memory twice need only the Variables plus the largest tensor.

    Args:
      params: a pytree of arrays, or of functions returning one.
      trainable: see `trainable_leaves`.
      on_variable: called with each Variable once it exists (progress reports).

    Example:
        >>> tree, flat = to_variables({"w": np.ones((2, 2), np.float32),
        ...                            "stats": lambda: np.zeros(2, np.float32)},
        ...                           trainable={"w": True, "stats": False})
        >>> [(v.name, v.trainable) for v in flat]   # leaves in key order: stats, w
        [('params/stats:0', False), ('params/w:0', True)]
    """
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(params)
    choices = trainable_leaves(params, trainable)
    variables = []
    for (key_path, leaf), choice in zip(leaves_with_path, choices):
        name = variable_name(key_path)
        try:
            value = leaf() if callable(leaf) else leaf
            if not _shareable(value):
                value = np.asarray(value)
            tf_dtype = tf_dtypes.to_tf_dtype(value.dtype)
        except (TypeError, ValueError) as e:
            raise ArgumentTypeError(f"params leaf {name} cannot become a tf.Variable: {e}. Fix: "
                                    f"params must be a pytree of numeric arrays (or of "
                                    f"functions returning one).") from None
        # tf_dtype, not numpy: bfloat16 (ml_dtypes, numpy kind "V") is a float too.
        inexact = tf_dtype.is_floating or tf_dtype.is_complex
        variables.append(tf.Variable(value, name=name, trainable=inexact and choice is not False))
        del value  # a loaded leaf is freed before the next one is loaded
        if on_variable is not None:
            on_variable(variables[-1])
    return jax.tree_util.tree_unflatten(treedef, variables), variables


def trackable_params(variables_tree: Any) -> Any:
    """The params tree (`tf.Variable` leaves) as a `tf.Module` attribute can hold it: every
    dict key a string, as in the Variables' names.

    TF's checkpoints name a dict's children by key and refuse any other key than a string
    ("a non-string key which maps to a trackable object"); Flax NNX's `nnx.List`,
    `nnx.Sequential` and `nnx.data([...])` give int keys (`{"layers": {0: ..., 2: ...}}`),
    so a SavedModel root or `tf.train.Checkpoint` holding the tree as it is fails to save.
    Call the converted function with the tree itself: this one is for TF to track and for
    users to find a Variable by path in the restored object (`params["layers"]["0"]`).

    Raises:
      ValueError: two keys of one dict read the same as strings (`{1: a, "1": b}`).

    Example:
        >>> tree = trackable_params({"layers": {0: {"w": tf.Variable(1.0)}}})
        >>> list(tree["layers"])
        ['0']
    """
    if isinstance(variables_tree, (tf.Variable, tf.Tensor, np.ndarray)):
        return variables_tree
    if isinstance(variables_tree, dict):
        string_keys = {str(k): trackable_params(v) for k, v in variables_tree.items()}
        if len(string_keys) != len(variables_tree):
            raise ValueError(f"params has a dict whose keys read the same as strings "
                             f"({sorted(map(repr, variables_tree))}), so TF cannot name its "
                             f"Variables apart. Fix: give each entry a distinct key.")
        return string_keys
    if type(variables_tree) in (list, tuple):
        return type(variables_tree)(trackable_params(v) for v in variables_tree)
    return variables_tree


def _shareable(value) -> bool:
    """Whether tf.Variable(value) takes `value`'s buffer as it is: a jax.Array on one CPU device.

    TF then shares the array's memory instead of copying it (np.asarray(value) first would
    give a read-only view that TF copies), and copies on the Variable's first write, so the
    JAX array never changes (pinned by tests/jax2tf_native/test_tf_variables.py)."""
    if not isinstance(value, jax.Array) or value.is_deleted():
        return False
    devices = value.devices()
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def jax_views(variables: Any) -> Any:
    """A pytree of tf.Variables as JAX arrays sharing the Variables' buffers (no copy).

    `save` computes JAX's reference outputs from these, so the parameters exist once (as the
    Variables) instead of once more as JAX device buffers. Shared through DLPack (the
    Variables' current values; TF copies on a later write, so the views never change). Where
    sharing is not possible (JAX's default device is not the CPU, a dtype DLPack or JAX does
    not take as it is, e.g. int64 without x64), the leaf is copied as before.

    Example:
        >>> v = tf.Variable(np.arange(4, dtype=np.float32))
        >>> view = jax_views({"w": v})["w"]
        >>> view.unsafe_buffer_pointer() == np.asarray(v.read_value()).ctypes.data
        True
    """
    on_cpu = jax.default_backend() == "cpu"

    def view(variable):
        value = variable.read_value()
        dtype = np.dtype(variable.dtype.as_numpy_dtype)
        if on_cpu and jax.dtypes.canonicalize_dtype(dtype) == dtype:
            try:
                return jax.numpy.from_dlpack(value)
            except (TypeError, ValueError, RuntimeError, BufferError):
                pass  # a dtype DLPack does not carry (bool, ...): a copy of this leaf
        return jax.device_put(value.numpy())

    return jax.tree.map(view, variables)
