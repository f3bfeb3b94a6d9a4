"""Bitwise StableHLO ops and shifts as TF ops, with StableHLO's semantics where TF's differ.

- `and`, `or`, `xor`, `not` of booleans are TF's logical ops;
- shifts by the bit width or more give 0 (or the sign for arithmetic right shifts; TF's kernels
  leave them undefined), negative shift amounts counting as huge unsigned ones;
- `count_leading_zeros` is a binary search over halves of the word (TF has no such op).
Unsigned integers run through the same-width signed type where TF lacks a kernel
(`dtype_support`).
"""
from __future__ import annotations

import tensorflow as tf

from tf_ops.plain import dtype_support as ds


def bitwise_and(ctx, op, x, y):
    return tf.logical_and(x, y) if x.dtype == tf.bool else tf.bitwise.bitwise_and(x, y)


def bitwise_or(ctx, op, x, y):
    return tf.logical_or(x, y) if x.dtype == tf.bool else tf.bitwise.bitwise_or(x, y)


def bitwise_xor(ctx, op, x, y):
    return tf.math.logical_xor(x, y) if x.dtype == tf.bool else tf.bitwise.bitwise_xor(x, y)


def bitwise_not(ctx, op, x):
    return tf.logical_not(x) if x.dtype == tf.bool else tf.bitwise.invert(x)


def _shift_too_far(shift):
    """The shift amount as unsigned is at least the bit width (negative amounts are huge)."""
    unsigned = ds.as_unsigned(shift) if shift.dtype in ds.SIGNED else shift
    return tf.greater_equal(unsigned, tf.cast(ds.bits(shift.dtype), unsigned.dtype))


def _clamped_shift(shift):
    return tf.where(_shift_too_far(shift), tf.zeros_like(shift), shift)


def shift_left(ctx, op, x, s):
    shifted = tf.bitwise.left_shift(x, _clamped_shift(s))
    return tf.where(_shift_too_far(s), tf.zeros_like(x), shifted)


def shift_right_logical(ctx, op, x, s):
    unsigned = ds.as_unsigned(x)
    shifted = tf.bitwise.right_shift(unsigned, ds.as_unsigned(_clamped_shift(s)))
    result = ds.bitcast_back(shifted, x.dtype)
    return tf.where(_shift_too_far(s), tf.zeros_like(x), result)


def shift_right_arithmetic(ctx, op, x, s):
    signed = ds.as_signed(x)
    clamped = ds.as_signed(_clamped_shift(s))
    shifted = tf.bitwise.right_shift(signed, clamped)
    sign_fill = tf.bitwise.right_shift(signed, tf.fill(tf.shape(signed), tf.constant(
        ds.bits(x.dtype) - 1, signed.dtype)))
    shifted = tf.where(_shift_too_far(s), sign_fill, shifted)
    return ds.bitcast_back(shifted, x.dtype)


def popcnt(ctx, op, x):
    return tf.cast(tf.raw_ops.PopulationCount(x=x), x.dtype)


def count_leading_zeros(ctx, op, x):
    """Binary search over halves of the word: log2(bits) steps of shifts and compares."""
    u = ds.as_unsigned(x)
    width = ds.bits(x.dtype)
    count = tf.zeros_like(u)
    step = width // 2
    while step >= 1:
        top = tf.bitwise.right_shift(u, tf.cast(tf.fill(tf.shape(u), width - step), u.dtype))
        empty = tf.equal(top, 0)
        count = tf.where(empty, count + tf.cast(step, u.dtype), count)
        u = tf.where(empty, tf.bitwise.left_shift(u, tf.cast(tf.fill(tf.shape(u), step),
                                                              u.dtype)), u)
        step //= 2
    count = tf.where(tf.equal(ds.as_unsigned(x), 0), tf.fill(tf.shape(u), tf.constant(
        width, u.dtype)), count)
    return ds.bitcast_back(count, x.dtype)
