"""Elementwise StableHLO ops as TF ops, with StableHLO's semantics where TF's differ.

Where the two disagree (checked against JAX on CPU in tests/tf_ops/plain):
- integer division by zero gives -1 (all ones) and remainder by zero the dividend; INT_MIN / -1
  gives INT_MIN and INT_MIN % -1 gives 0 (TF's kernels fail or trap there);
- shifts by the bit width or more give 0 (or the sign for arithmetic right shifts);
- max/min of floats propagate NaN;
- float -> integer converts NaN to 0 and saturates out-of-range values;
- integer powers with negative exponents are 0 except for bases 1 and -1;
- `compare` with TOTALORDER orders -NaN < -inf < ... < -0 < +0 < ... < inf < NaN;
- round_nearest_afz rounds halves away from zero.
Unsigned integers run through the same-width signed type where TF lacks a kernel
(`dtype_support`).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain.program import Op


def _result_dtype(op: Op) -> tf.DType:
    return tf.as_dtype(op.result_types[0].dtype)


# ------------------------------------------------------------------------ arithmetic

def add(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_or(x, y)
    return tf.add(x, y)


def subtract(ctx, op, x, y):
    return tf.subtract(x, y)


def multiply(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_and(x, y)
    return tf.multiply(x, y)


def divide(ctx, op, x, y):
    if x.dtype in ds.FLOATS or x.dtype in ds.COMPLEX:
        return tf.math.divide(x, y)
    zero = tf.equal(y, 0)
    safe_y = tf.where(zero, tf.ones_like(y), y)
    if x.dtype in ds.SIGNED:
        overflow = tf.logical_and(tf.equal(x, x.dtype.min), tf.equal(y, -1))
        safe_y = tf.where(overflow, tf.ones_like(y), safe_y)
        quotient = tf.raw_ops.TruncateDiv(x=x, y=safe_y)  # x / 1 = INT_MIN where it overflowed
    else:
        quotient = tf.math.floordiv(x, safe_y)  # floor = trunc for unsigned values
    return tf.where(zero, tf.fill(tf.shape(x), tf.constant(-1 if x.dtype in ds.SIGNED
                                                           else x.dtype.max, x.dtype)),
                    quotient)


def remainder(ctx, op, x, y):
    if x.dtype in ds.FLOATS:
        wide = ds.wider(x.dtype)
        r = tf.raw_ops.TruncateMod(x=tf.cast(x, wide), y=tf.cast(y, wide))
        return tf.cast(r, x.dtype)  # fmod is exact, so rounding back loses nothing
    zero = tf.equal(y, 0)
    safe_y = tf.where(zero, tf.ones_like(y), y)
    if x.dtype in ds.SIGNED:
        overflow = tf.equal(y, -1)  # x % -1 = 0 always; avoids INT_MIN % -1
        safe_y = tf.where(overflow, tf.ones_like(y), safe_y)
        wide = ds.wider(x.dtype)
        r = tf.cast(tf.raw_ops.TruncateMod(x=tf.cast(x, wide), y=tf.cast(safe_y, wide)),
                    x.dtype)
    else:
        r = x - tf.math.floordiv(x, safe_y) * safe_y
    return tf.where(zero, x, r)


def _nan_propagating(fn, x, y):
    result = fn(x, y)
    if x.dtype in ds.FLOATS:
        nan = tf.logical_or(tf.math.is_nan(x), tf.math.is_nan(y))
        result = tf.where(nan, tf.fill(tf.shape(result), tf.constant(np.nan, x.dtype)), result)
    return result


def maximum(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_or(x, y)
    return _nan_propagating(tf.maximum, x, y)


def minimum(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_and(x, y)
    return _nan_propagating(tf.minimum, x, y)


def check_minmax(op):
    if op.operand_types[0].element.startswith("complex"):
        return "max/min of complex numbers (lexicographic in XLA) has no TF op"
    return None


def power(ctx, op, x, y):
    if x.dtype in ds.FLOATS or x.dtype in ds.COMPLEX:
        return tf.pow(x, y)
    return _integer_power(x, y)


def _integer_power(x, y):
    """Exponentiation by squaring over the exponent's bits: wraps as XLA does; a negative
    exponent gives 0, except 1 for base 1 and +-1 for base -1."""
    dtype = x.dtype
    compute = ds.as_signed(x)
    exponent = ds.as_signed(tf.cast(y, dtype))
    signed_type = compute.dtype
    negative = tf.less(exponent, 0) if dtype in ds.SIGNED else tf.zeros_like(exponent, tf.bool)
    e = tf.where(negative, tf.zeros_like(exponent), exponent)
    e_bits = ds.as_unsigned(e) if e.dtype in ds.SIGNED else e
    result = tf.ones_like(compute)
    base = compute
    one_u = tf.ones_like(e_bits)
    for i in range(ds.bits(dtype)):
        shift = tf.fill(tf.shape(e_bits), tf.constant(i, e_bits.dtype))
        bit = tf.not_equal(tf.bitwise.bitwise_and(tf.bitwise.right_shift(e_bits, shift),
                                                  one_u), 0)
        result = tf.where(bit, result * base, result)
        base = base * base
    if dtype in ds.SIGNED:
        odd = tf.not_equal(tf.bitwise.bitwise_and(exponent, 1), 0)
        minus_one_result = tf.where(odd, -tf.ones_like(compute), tf.ones_like(compute))
        negative_result = tf.where(tf.equal(compute, 1), tf.ones_like(compute),
                                   tf.where(tf.equal(compute, -1), minus_one_result,
                                            tf.zeros_like(compute)))
        result = tf.where(negative, negative_result, result)
    return ds.bitcast_back(tf.cast(result, signed_type), dtype)


def atan2(ctx, op, y, x):
    if y.dtype in ds.COMPLEX:
        raise AssertionError("refused by check_real")
    return tf.math.atan2(y, x)


def check_real(op):
    if op.operand_types[0].element.startswith("complex"):
        return "this op on complex numbers has no exact TF counterpart"
    return None


# ------------------------------------------------------------------------ bitwise and shifts

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


# ------------------------------------------------------------------------ unary math

def negate(ctx, op, x):
    if x.dtype in ds.UNSIGNED:
        return ds.via_signed(tf.negative, x.dtype, x)
    return tf.negative(x)


def abs_(ctx, op, x):
    if x.dtype in ds.UNSIGNED:
        return x
    return tf.abs(x)


def sign(ctx, op, x):
    if x.dtype in ds.UNSIGNED:
        return tf.cast(tf.greater(x, 0), x.dtype)
    return tf.sign(x)


def _unary(tf_fn):
    def lower(ctx, op, x):
        return tf_fn(x)
    lower.__name__ = getattr(tf_fn, "__name__", "unary")
    return lower


exponential = _unary(tf.exp)
exponential_minus_one = _unary(tf.math.expm1)
log = _unary(tf.math.log)
log_plus_one = _unary(tf.math.log1p)
logistic = _unary(tf.sigmoid)
sqrt = _unary(tf.sqrt)
rsqrt = _unary(tf.math.rsqrt)
tanh = _unary(tf.tanh)
sine = _unary(tf.sin)
cosine = _unary(tf.cos)
tan = _unary(tf.tan)
floor = _unary(tf.floor)
ceil = _unary(tf.math.ceil)
round_nearest_even = _unary(tf.math.round)  # TF's Round is half-to-even
is_finite = _unary(tf.math.is_finite)
real = _unary(tf.math.real)
imag = _unary(tf.math.imag)


def cbrt(ctx, op, x):
    compute = ds.float_compute_type(x.dtype)
    xc = tf.cast(x, compute)
    root = tf.sign(xc) * tf.pow(tf.abs(xc), tf.constant(1.0 / 3.0, compute))
    return tf.cast(root, x.dtype)


def round_nearest_afz(ctx, op, x):
    truncated = tf.where(x < 0, tf.math.ceil(x), tf.floor(x))
    half = tf.equal(tf.abs(x - truncated), tf.constant(0.5, x.dtype))
    return tf.where(half, truncated + tf.sign(x), tf.math.round(x))


def complex_(ctx, op, re, im):
    return tf.complex(re, im)


# ------------------------------------------------------------------------ compare and select

_COMPARE = {"EQ": tf.equal, "NE": tf.not_equal, "LT": tf.less, "LE": tf.less_equal,
            "GT": tf.greater, "GE": tf.greater_equal}


def compare(ctx, op, x, y):
    direction = op.attr("comparison_direction")
    kind = op.attr("compare_type")
    fn = _COMPARE[direction]
    if x.dtype == tf.bool:
        if direction in ("EQ", "NE"):
            return fn(x, y)
        return fn(tf.cast(x, tf.int8), tf.cast(y, tf.int8))
    if kind == "TOTALORDER" and x.dtype in ds.FLOATS:
        return fn(total_order_key(x), total_order_key(y))
    return fn(x, y)


def total_order_key(x):
    """Signed integers ordered as StableHLO's TOTALORDER orders the floats `x`."""
    signed = tf.bitcast(x, {2: tf.int16, 4: tf.int32, 8: tf.int64}[x.dtype.size])
    flipped = tf.bitwise.bitwise_xor(signed, tf.constant(signed.dtype.max, signed.dtype))
    return tf.where(signed < 0, flipped, signed)


def check_compare(op):
    element = op.operand_types[0].element
    if element.startswith("complex") and op.attr("comparison_direction") not in ("EQ", "NE"):
        return "ordering complex numbers has no TF op"
    return None


def select(ctx, op, pred, on_true, on_false):
    if pred.shape.rank == 0 and on_true.shape.rank != 0:
        pred = tf.fill(tf.shape(on_true), pred)
    return tf.where(pred, on_true, on_false)


def clamp(ctx, op, low, x, high):
    return minimum(ctx, op, maximum(ctx, op, x, low), high)


# ------------------------------------------------------------------------ conversions

def convert(ctx, op, x):
    to = _result_dtype(op)
    if x.dtype == to:
        return x
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
    if to.size < x.dtype.size:
        return tf.bitcast(x, to)  # TF adds the trailing dimension as StableHLO does
    return tf.bitcast(x, to)      # and drops it when widening


def check_bitcast(op):
    types = (op.operand_types[0].element, op.result_types[0].element)
    if "i1" in types or any(t.startswith("complex") for t in types):
        return "bitcasting booleans or complex numbers has no TF op"
    return None


def reduce_precision(ctx, op, x):
    """Rounds to `mantissa_bits` (half to even) and clamps the exponent to `exponent_bits`, as
    XLA does, on the float's bits."""
    exponent_bits = op.attr("exponent_bits")
    mantissa_bits = op.attr("mantissa_bits")
    dtype = x.dtype
    compute = tf.float64 if dtype == tf.float64 else tf.float32
    xf = tf.cast(x, compute)
    int_type = tf.int64 if compute == tf.float64 else tf.int32
    src_mantissa = 52 if compute == tf.float64 else 23
    src_exponent = 11 if compute == tf.float64 else 8
    bits_ = tf.bitcast(xf, int_type)
    word = 64 if compute == tf.float64 else 32

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
        magnitude = tf.bitwise.bitwise_and(bits_, const((1 << (word - 1)) - 1))
        sign_bits = tf.bitwise.bitwise_and(bits_, const(1 << (word - 1)))
        src_bias = (1 << (src_exponent - 1)) - 1
        dst_bias = (1 << (exponent_bits - 1)) - 1
        overflow = magnitude > const(((src_bias + dst_bias) << src_mantissa)
                                     | ((1 << src_mantissa) - 1))
        underflow = magnitude <= const((src_bias - dst_bias) << src_mantissa)
        inf_bits = const(((1 << src_exponent) - 1) << src_mantissa)
        magnitude = tf.where(overflow, tf.fill(tf.shape(magnitude), inf_bits), magnitude)
        magnitude = tf.where(underflow, tf.zeros_like(magnitude), magnitude)
        bits_ = tf.bitwise.bitwise_or(sign_bits, magnitude)
    rounded = tf.bitcast(bits_, compute)
    rounded = tf.where(tf.math.is_nan(xf), xf, rounded)
    return tf.cast(rounded, dtype)
