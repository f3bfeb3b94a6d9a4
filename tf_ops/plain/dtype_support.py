"""Which dtypes TF's CPU kernels take, and the exact detours for those they do not.

Measured on TF 2.21 (graph mode, CPU): e.g. `TruncateMod` runs on int32/int64/float32/float64
only, `Neg`/`Abs` on no unsigned type, `MatMul` on no 8/16-bit integer, bitwise ops on no
float. A lowering that needs a missing kernel computes in a wider or same-width signed type
where that gives the same bits (two's complement add/sub/mul/neg wrap alike for signed and
unsigned), or refuses at conversion.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

SIGNED = (tf.int8, tf.int16, tf.int32, tf.int64)
UNSIGNED = (tf.uint8, tf.uint16, tf.uint32, tf.uint64)
INTEGERS = SIGNED + UNSIGNED
FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
COMPLEX = (tf.complex64, tf.complex128)

_SAME_WIDTH_SIGNED = {tf.uint8: tf.int8, tf.uint16: tf.int16, tf.uint32: tf.int32,
                      tf.uint64: tf.int64}
_SAME_WIDTH_UNSIGNED = {v: k for k, v in _SAME_WIDTH_SIGNED.items()}


def bits(dtype: tf.DType) -> int:
    return dtype.size * 8


def as_signed(x: tf.Tensor) -> tf.Tensor:
    """An unsigned tensor's bits as the signed type of the same width (others unchanged)."""
    signed = _SAME_WIDTH_SIGNED.get(x.dtype)
    return tf.bitcast(x, signed) if signed is not None else x


def as_unsigned(x: tf.Tensor) -> tf.Tensor:
    """A signed integer tensor's bits as the unsigned type of the same width."""
    unsigned = _SAME_WIDTH_UNSIGNED.get(x.dtype)
    return tf.bitcast(x, unsigned) if unsigned is not None else x


def bitcast_back(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return x if x.dtype == dtype else tf.bitcast(x, dtype)


def via_signed(fn, dtype: tf.DType, *xs: tf.Tensor) -> tf.Tensor:
    """`fn` on the same-width signed bits of unsigned `xs`, cast back: for wrap-around
    arithmetic (add, sub, mul, neg) whose bits do not depend on signedness."""
    return bitcast_back(fn(*[as_signed(x) for x in xs]), dtype)


def wider(dtype: tf.DType) -> tf.DType:
    """A type holding every value of `dtype` whose TF kernels cover division and remainder."""
    if dtype in (tf.int8, tf.int16, tf.uint8, tf.uint16):
        return tf.int32
    if dtype in (tf.int32, tf.uint32):
        return tf.int64
    if dtype in (tf.float16, tf.bfloat16):
        return tf.float32
    return dtype


def float_compute_type(dtype: tf.DType) -> tf.DType:
    """f16/bf16 math runs in float32 and rounds back once, as XLA's CPU backend does."""
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def scalar(value, dtype: tf.DType) -> tf.Tensor:
    """A scalar constant of `dtype`, built from a numpy value: eagerly, TF caches constants
    made from Python floats by value, and -0.0 == 0.0 there (so `tf.constant(-0.0)` can give
    a cached +0.0)."""
    return tf.constant(np.asarray(value, dtype.as_numpy_dtype))
