"""Conversions between element types as TF ops: convert, bitcast_convert and reduce_precision,
with StableHLO's (XLA CPU's) semantics where TF's differ.

- float -> integer converts NaN to 0 and saturates out-of-range values (TF's Cast wraps);
- complex -> real keeps the real part;
- bfloat16 -> float32 right after bfloat16 arithmetic takes the float32 value XLA computed
  before rounding it (`Context.unrounded`);
- reduce_precision rounds the mantissa half to even and then, comparing the exponent field
  alone as XLA does, flushes every value below the target's smallest normal to a signed zero
  (the target has no subnormals) and every value above its largest finite to infinity. It
  works on the source type's own bits, so f16/bf16 inputs are not widened first (a widened
  f16 subnormal would be flushed where XLA, with the same exponent width, keeps it).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain import errors
from tf_ops.plain.program import Op


def _result_dtype(op: Op) -> tf.DType:
    return tf.as_dtype(op.result_types[0].dtype)


def convert(ctx, op, x):
    to = _result_dtype(op)
    if x.dtype == to:
        return x
    if x.dtype == tf.bfloat16 and to == tf.float32:
        unrounded = ctx.unrounded(op.operands[0])  # XLA's value before rounding to bf16
        if unrounded is not None:
            return unrounded
    if to == tf.bool:
        return tf.not_equal(x, tf.zeros_like(x))
    if x.dtype in ds.FLOATS and to in ds.INTEGERS:
        return _float_to_integer(x, to)
    if x.dtype in ds.COMPLEX and to not in ds.COMPLEX:
        return tf.cast(tf.math.real(x), to)
    return tf.cast(x, to)


def _float_to_integer(x, to):
    """NaN -> 0, out-of-range values saturate (XLA's CPU semantics); in range: truncation."""
    info = np.iinfo(to.as_numpy_dtype)
    compute = tf.float64 if x.dtype == tf.float64 else tf.float32
    xf = tf.cast(x, compute)
    low = tf.constant(float(info.min), compute)            # a power of two (or 0): exact
    high_bound = tf.constant(float(info.max) + 1.0, compute)  # 2**bits: exact
    in_range = tf.logical_and(xf >= low, xf < high_bound)
    safe = tf.where(in_range, xf, tf.zeros_like(xf))
    result = tf.cast(safe, to)
    result = tf.where(xf >= high_bound, tf.fill(tf.shape(result), tf.constant(info.max, to)),
                      result)
    result = tf.where(xf < low, tf.fill(tf.shape(result), tf.constant(info.min, to)), result)
    return result  # NaN fails both bounds and stays 0


def bitcast_convert(ctx, op, x):
    to = _result_dtype(op)
    if x.dtype == to:
        return x
    if to == tf.bool or x.dtype == tf.bool:
        raise AssertionError("refused by check_bitcast")
    if to.size == x.dtype.size:
        return tf.bitcast(x, to)
    if not tf.executing_eagerly() and x.op.type == "Bitcast" \
            and x.op.inputs[0].dtype.size != x.dtype.size:
        # TF's graph optimizer merges two width-changing Bitcasts into one and keeps the
        # first one's shape (float64 -> uint16[4] -> uint8 gives [8], not [4, 2]).
        raise errors.unsupported(op, "a width-changing bitcast of a width-changing bitcast: "
                                     "TF's graph optimizer merges the two Bitcast ops and "
                                     "loses the shape; bitcast once, from the first type to "
                                     "the last")
    if to.size < x.dtype.size:
        return tf.bitcast(x, to)  # TF adds the trailing dimension as StableHLO does
    return tf.bitcast(x, to)      # and drops it when widening


def check_bitcast(op):
    types = (op.operand_types[0].element, op.result_types[0].element)
    if "i1" in types or any(t.startswith("complex") for t in types):
        return "bitcasting booleans or complex numbers has no TF op"
    return None


# Per float type: the integer type of its bits, its mantissa and exponent widths.
_LAYOUT = {tf.float16: (tf.int16, 10, 5), tf.bfloat16: (tf.int16, 7, 8),
           tf.float32: (tf.int32, 23, 8), tf.float64: (tf.int64, 52, 11)}


def reduce_precision(ctx, op, x):
    """XLA's reduce_precision on the bits of `x`'s own type (see the module docstring)."""
    exponent_bits = op.attr("exponent_bits")
    mantissa_bits = op.attr("mantissa_bits")
    int_type, src_mantissa, src_exponent = _LAYOUT[x.dtype]
    word = ds.bits(x.dtype)
    bits_ = tf.bitcast(x, int_type)

    def const(value: int):  # a Python int as the word's two's-complement bits
        value &= (1 << word) - 1
        return tf.constant(value - (1 << word) if value >> (word - 1) else value, int_type)

    if mantissa_bits < src_mantissa:
        drop = src_mantissa - mantissa_bits
        last_kept = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits_, const(drop)),
                                           const(1))
        bias = const((1 << (drop - 1)) - 1) + last_kept
        bits_ = tf.bitwise.bitwise_and(bits_ + bias, const(~((1 << drop) - 1)))
    if exponent_bits < src_exponent:
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        exponent = tf.bitwise.bitwise_and(bits_, const(exponent_mask))
        sign_bits = tf.bitwise.bitwise_and(bits_, const(1 << (word - 1)))
        src_bias = (1 << (src_exponent - 1)) - 1
        dst_bias = (1 << (exponent_bits - 1)) - 1
        # Exponent fields are non-negative as signed words: signed compares order them.
        overflow = exponent > const((src_bias + dst_bias) << src_mantissa)
        underflow = exponent <= const((src_bias - dst_bias) << src_mantissa)
        bits_ = tf.where(overflow, tf.bitwise.bitwise_or(sign_bits, const(exponent_mask)),
                         bits_)
        bits_ = tf.where(underflow, sign_bits, bits_)
    rounded = tf.bitcast(bits_, x.dtype)
    return tf.where(tf.math.is_nan(x), x, rounded)
