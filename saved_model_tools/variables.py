"""Parameters as `tf.Variable`s named by their pytree path, so a SavedModel stores them in its
checkpoint (never as graph constants) and TF code can fine-tune them."""
from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native.errors import ArgumentTypeError
from tf_ops import dtypes as tf_dtypes


def variable_name(key_path) -> str:
    """"params" + ['dense']['w'] -> "params/dense/w" (characters TF rejects become _)."""
    parts = []
    for key in key_path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    name = "/".join(["params", *parts])
    return re.sub(r"[^A-Za-z0-9_./-]", "_", name)


def to_variables(params: Any) -> tuple[Any, list[tf.Variable]]:
    """Returns the params pytree with tf.Variable leaves, and the flat list of Variables.

    Float and complex leaves are trainable; integer and bool leaves are not.

    Example:
        >>> tree, flat = to_variables({"w": np.ones((2, 2), np.float32)})
        >>> flat[0].name
        'params/w:0'
    """
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(params)
    variables = []
    for key_path, leaf in leaves_with_path:
        name = variable_name(key_path)
        try:
            value = np.asarray(leaf)
            tf_dtypes.to_tf_dtype(value.dtype)
        except (TypeError, ValueError) as e:
            raise ArgumentTypeError(f"params leaf {name} cannot become a tf.Variable: {e}. Fix: "
                                    f"params must be a pytree of numeric arrays.") from None
        trainable = bool(np.issubdtype(value.dtype, np.inexact))
        variables.append(tf.Variable(value, name=name, trainable=trainable))
    return jax.tree_util.tree_unflatten(treedef, variables), variables
