"""Mapping between JAX (numpy) dtypes and TensorFlow dtypes."""
from __future__ import annotations

import jax
import numpy as np
import tensorflow as tf

# The dtypes an exported module may take or return, as TF knows them. float0 (JAX's tangent type
# for integer values) has no TF counterpart and travels as bool (see to_tf_dtype).
_SUPPORTED = (
    tf.bool, tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64,
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
)
SUPPORTED_TF_DTYPES = frozenset(_SUPPORTED)


def to_tf_dtype(jax_dtype) -> tf.DType:
    """Returns the TF dtype for a JAX/numpy dtype.

    Example:
        >>> to_tf_dtype(np.dtype("float32"))
        tf.float32
    """
    if np.dtype(jax_dtype) == jax.dtypes.float0:
        # JAX's tangent type of integer values holds no data; jax2tf passes it as bool.
        return tf.bool
    tf_dtype = tf.dtypes.as_dtype(np.dtype(jax_dtype))
    if tf_dtype not in SUPPORTED_TF_DTYPES:
        raise TypeError(f"dtype {np.dtype(jax_dtype)} has no TensorFlow counterpart that "
                        f"XlaCallModule accepts; supported: {sorted(d.name for d in _SUPPORTED)}")
    return tf_dtype


def to_numpy_dtype(tf_dtype: tf.DType) -> np.dtype:
    """Returns the numpy dtype (the one JAX uses) for a TF dtype, or raises TypeError.

    Example:
        >>> to_numpy_dtype(tf.bfloat16)
        dtype(bfloat16)
    """
    tf_dtype = tf.dtypes.as_dtype(tf_dtype)
    if tf_dtype not in SUPPORTED_TF_DTYPES:
        raise TypeError(f"TF dtype {tf_dtype.name} cannot be passed to a JAX function; "
                        f"supported: {sorted(d.name for d in _SUPPORTED)}")
    return np.dtype(tf_dtype.as_numpy_dtype)
