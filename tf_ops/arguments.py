"""The TF ops on a call's arguments and results: dtype casts, run-time shapes, graph names.

`jax2tf_native.prepared_export` decides what a call's arguments need (its checks raise our errors);
the ops come from here.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from tf_ops import dtypes


def cast(tensor: tf.Tensor, dtype) -> tf.Tensor:
    """`tensor` cast to the TF dtype of `dtype` (a numpy/JAX dtype).

    Example:
        >>> import numpy as np
        >>> cast(tf.constant([1.5], tf.float64), np.dtype("float32")).dtype
        tf.float32
    """
    return tf.cast(tensor, dtypes.to_tf_dtype(dtype))


def shapes(tensors: Sequence[tf.Tensor], static: Sequence[Sequence[int | None]]) -> list[list]:
    """Each dimension as an int when `static` knows it, else as a run-time scalar tensor.

    Example:
        >>> int(shapes([tf.ones((2, 3))], [(2, None)])[0][1])
        3
    """
    result = []
    for tensor, shape in zip(tensors, static):
        if all(d is not None for d in shape):
            result.append(list(shape))
            continue
        dynamic = tf.shape(tensor)
        result.append([d if d is not None else dynamic[i] for i, d in enumerate(shape)])
    return result


def named(tensors: Sequence[tf.Tensor], name: str) -> list[tf.Tensor]:
    """Identity ops named as jax2tf names its graph's inputs and outputs.

    Tools that read frozen graphs look for `jax2tf_arg_{i}` (flat input i) and `jax2tf_out`,
    `jax2tf_out_1`, ... (flat outputs, uniquified by TF as for jax2tf). Graph mode only: eager
    calls have no graph, and the identities cost nothing once Grappler or XLA runs.

    Example:
        >>> @tf.function
        ... def f(x):
        ...     return named([x], "jax2tf_arg_{}")[0]
        >>> f.get_concrete_function(tf.TensorSpec(())).outputs[0].op.inputs[0].op.name
        'jax2tf_arg_0'
    """
    return [tf.identity(t, name=name.format(i)) for i, t in enumerate(tensors)]
