"""Elementwise StableHLO ops as TF ops, with StableHLO's semantics where TF's differ.

Where the two disagree (checked against JAX on CPU in tests/tf_ops/plain):
- integer division by zero gives -1 (all ones) and remainder by zero the dividend; INT_MIN / -1
  gives INT_MIN and INT_MIN % -1 gives 0 (TF's kernels fail or trap there);
- max/min of floats propagate NaN and order -0.0 below +0.0 (TF's Maximum returns either
  zero on a tie);
- sign keeps the sign of zeros and gives a signed zero for subnormals (XLA's CPU backend treats
  f32/f64/bf16 subnormals as zeros; TF's Sign returns garbage there); complex sign divides
  by XLA's scaled |z| (TF's squares |z| and underflows);
- complex multiplication rounds as XLA's fused multiply-adds do (`complex_multiply`), so
  products that overflow give XLA's infinities instead of NaN;
- integer powers with negative exponents are 0 except for bases 1 and -1;
- `compare` with TOTALORDER orders -NaN < -inf < ... < -0 < +0 < ... < inf < NaN;
- round_nearest_afz rounds halves away from zero.
Arithmetic with a constant operand follows XLA's algebraic simplifier, which rewrites it before
running: x + 0 and x - 0 give x (even -0.0 + 0.0 stays -0.0), x * 1 and x / 1 give x, x * -1
and -0.0 - x give -x; `0 - x` is an IEEE subtraction written so that TF's graph optimizer
(which turns it into -x) cannot change the sign of its zeros.
Bitwise ops and shifts are in `bitwise`. Unsigned integers run through the same-width signed type where TF lacks a kernel
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

def _splats(ctx, op) -> list:
    """Each operand's constant scalar (`Context.splat`), or None."""
    return [ctx.splat(v) for v in op.operands]


def _is_value(constant, value: float) -> bool:
    return constant is not None and constant.dtype.kind != "b" and bool(constant == value)


def add(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_or(x, y)
    x_const, y_const = _splats(ctx, op)
    if _is_value(y_const, 0):  # XLA: A + 0 -> A (so -0.0 + 0.0 stays -0.0)
        return x
    if _is_value(x_const, 0):
        return y
    if x is y and x.dtype in ds.COMPLEX:
        # TF's graph optimizer turns x + x into 2 * x, a complex product whose imaginary
        # part is 2 * -0.0 + 0 * re = +0.0 where x + x keeps -0.0: add the parts.
        doubled = tf.add(tf.math.real(x), tf.math.real(x)), tf.add(tf.math.imag(x),
                                                                  tf.math.imag(x))
        return tf.complex(*doubled)
    return tf.add(x, y)


def subtract(ctx, op, x, y):
    x_const, y_const = _splats(ctx, op)
    if _is_value(y_const, 0):  # XLA: A - 0 -> A, also for -0.0
        return x
    if x.dtype in ds.FLOATS and _is_value(x_const, 0):
        if np.signbit(x_const):  # XLA: -0.0 - A -> -A
            return tf.negative(y)
        return plus_zero(tf.negative(y))  # 0 - y, which TF's optimizer would turn into -y
    return tf.subtract(x, y)


def plus_zero(x):
    """IEEE `x + 0.0` (-0.0 becomes +0.0) in a form TF's graph optimizer keeps: it removes
    additions of constant zeros."""
    return tf.where(tf.equal(x, 0), tf.zeros([], x.dtype), x)


def multiply(ctx, op, x, y):
    if x.dtype == tf.bool:
        return tf.logical_and(x, y)
    x_const, y_const = _splats(ctx, op)
    for constant, other in ((y_const, x), (x_const, y)):
        if _is_value(constant, 1):  # XLA: A * 1 -> A
            return other
        if _is_value(constant, -1) and other.dtype in ds.FLOATS:  # XLA: A * -1 -> -A
            return tf.negative(other)
    if x.dtype in (tf.complex64, tf.complex128):
        return complex_multiply(x, y)
    return tf.multiply(x, y)


def complex_multiply(x, y, scatter: bool = False):
    """XLA's CPU complex product (a+bi)(c+di): re = fma(a, c, -(b*d)) and im = fma(b, c, a*d),
    or fma(a, d, b*c) in a scatter's update loop (`scatter`), as LLVM contracts them
    (measured: bit for bit on 20,000 random complex64 products each). TF has no fma: each
    width forms it as `_fma_via_float64` and `_fma_special_values` say."""
    a, b = tf.math.real(x), tf.math.imag(x)
    c, d = tf.math.real(y), tf.math.imag(y)
    fma = _fma_via_float64 if x.dtype == tf.complex64 else _fma_special_values
    re = fma(a, c, -(b * d))
    im = fma(a, d, b * c) if scatter else fma(b, c, a * d)
    return tf.complex(re, im)


def _fma_via_float64(u, v, p):
    """float32 fma(u, v, p): a float32 product is exact in float64, so the fma is one float64
    addition rounded to float32, a double rounding that differs from the fma about once in
    2**29 products."""
    wide = lambda t: tf.cast(t, tf.float64)
    return tf.cast(wide(u) * wide(v) + wide(p), tf.float32)


def _fma_special_values(u, v, p):
    """float64 fma(u, v, p), with no wider float to form it in: XLA's special values, else
    `u * v + p`. It is `p` wherever `p` is infinite and `u`, `v` are finite, since the exact
    `u * v` is then finite and cannot meet the opposite infinity, where the rounded `u * v`
    overflows and `u * v + p` is NaN. Elsewhere `u * v + p` is within the contract's
    `complex_arith` bound (measured against jax.jit on 200,000 complex128 products drawn with
    edge values: no NaN, infinity or finiteness differs; 31,719 did with TF's product)."""
    exact_finite = tf.logical_and(tf.math.is_finite(u), tf.math.is_finite(v))
    return tf.where(tf.logical_and(exact_finite, tf.math.is_inf(p)), p, u * v + p)


def divide(ctx, op, x, y):
    x_const, y_const = _splats(ctx, op)
    if _is_value(y_const, 1):  # XLA: A / 1 -> A
        return x
    if x.dtype in ds.FLOATS and _is_value(x_const, 1) and not np.signbit(x_const):
        # 1 / y as (-1 / y) * -1, the same bits: TF's graph optimizer turns a division of
        # ones into its Reciprocal kernel, which on CPU is up to 3 ulps off in float32, and
        # 4,907 for |y| > 2**100 (its Newton step meets the smallest normal). A product, not
        # a negation: Neg flips a NaN's sign bit, and top_k and sort rank -NaN below numbers.
        minus_one = tf.constant(-1, x.dtype)
        return tf.math.divide(minus_one, y) * minus_one
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


def maximum(ctx, op, x, y):
    return max_min(True, x, y, *_splats(ctx, op))


def minimum(ctx, op, x, y):
    return max_min(False, x, y, *_splats(ctx, op))


def max_min(is_max: bool, x, y, x_const=None, y_const=None):
    """stablehlo.maximum (`is_max`) or minimum: NaN wins, -0.0 < +0.0 (IEEE 754-2019
    maximum/minimum, as XLA's CPU backend computes them). `x_const`/`y_const` are operands'
    constant scalars, if known. Against a nonzero constant TF's own Maximum/Minimum is exact:
    with a scalar operand its kernels keep a NaN (pinned in every float dtype, both operand
    orders and the vector tail by tests/tf_ops/plain/test_core.py) and no zero can tie; it is
    the op a TF engineer writes and one tf2onnx turns into ONNX's Max/Min, where a select
    would become `cond * c + (1 - cond) * x` (NaN for an infinite x). Against a zero a compare
    and a select give the zero of the right sign."""
    if x.dtype == tf.bool:
        return tf.logical_or(x, y) if is_max else tf.logical_and(x, y)
    if x.dtype not in ds.FLOATS:
        return tf.maximum(x, y) if is_max else tf.minimum(x, y)
    if x_const is not None and y_const is None:
        x, y, x_const, y_const = y, x, y_const, x_const
    if y_const is not None and not np.isnan(y_const):
        c = ds.scalar(y_const, x.dtype)
        if y_const != 0:
            return tf.maximum(x, c) if is_max else tf.minimum(x, c)
        # The constant wins ties unless it is the zero the result must not take (-0.0 for
        # max, +0.0 for min); a NaN `x` fails every compare and is kept.
        strict = bool(np.signbit(y_const)) == is_max  # y_const is a zero here
        if is_max:
            wins = tf.less(x, c) if strict else tf.less_equal(x, c)
        else:
            wins = tf.greater(x, c) if strict else tf.greater_equal(x, c)
        return tf.where(wins, c, x)
    result = tf.maximum(x, y) if is_max else tf.minimum(x, y)
    nan = tf.logical_or(tf.math.is_nan(x), tf.math.is_nan(y))
    result = tf.where(nan, tf.constant(np.nan, x.dtype), result)
    # Zeros tie in TF's kernels, which return either. IEEE addition of two zeros gives -0.0
    # only if both are -0.0: the maximum; the minimum is -0.0 if either is.
    zeros = tf.logical_and(tf.equal(x, y), tf.equal(x, 0))
    tie = x + y if is_max else tf.negative(tf.negative(x) - y)
    return tf.where(zeros, tie, result)


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
    if x.dtype in ds.COMPLEX:
        return _complex_sign(x)
    if x.dtype in ds.FLOATS:
        return float_sign(x)
    return tf.sign(x)


def float_sign(x):
    """XLA's sign: +-1, NaN, or a zero with x's sign for zeros and, except in f16 (which XLA's
    CPU backend widens to f32), subnormals. TF's Sign is right only where |x| is normal."""
    if x.dtype == tf.float16:
        zero = tf.equal(x, 0)
    else:
        tiny = np.finfo(np.float64 if x.dtype == tf.float64 else np.float32).tiny
        zero = tf.less(tf.abs(x), tf.constant(tiny, x.dtype))
    return tf.where(zero, x * tf.zeros([], x.dtype), tf.sign(x))


def _complex_sign(z):
    """z / |z| as XLA computes it, z itself where |z| is 0. XLA's |z| is
    max * sqrt(fma(min/max, min/max, 1)) with max, min of |re|, |im| (no underflow where TF's
    Sign squares |z|); for complex64 the fma is one float64 addition (a square of a float32
    is exact in float64), for complex128 an unfused one (which may round differently)."""
    real = z.dtype.real_dtype
    re, im = tf.math.real(z), tf.math.imag(z)
    high = tf.maximum(tf.abs(re), tf.abs(im))
    low = tf.minimum(tf.abs(re), tf.abs(im))
    ratio = low / high
    if real == tf.float32:
        wide = tf.cast(ratio, tf.float64)
        scale = tf.cast(wide * wide + 1, tf.float32)
    else:
        scale = ratio * ratio + 1
    magnitude = high * tf.sqrt(scale)
    magnitude = tf.where(tf.equal(high, 0), tf.zeros([], real), magnitude)
    unit = tf.complex(re / magnitude, im / magnitude)
    return tf.where(tf.equal(magnitude, 0), z, unit)


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
    magnitude = tf.abs(xc)
    root = tf.pow(magnitude, tf.constant(1.0 / 3.0, compute))
    if compute == tf.float64:
        # pow by a rounded 1/3 is off by ~|log x| * eps: 116 ulps near 1e-300 in float64
        # (float32's range keeps it within a few); one Newton step, (2r + x / r**2) / 3 (no
        # r**3 to overflow), brings it to about an ulp.
        newton = (2.0 * root + magnitude / (root * root)) / 3.0
        root = tf.where(tf.logical_and(root > 0, tf.math.is_finite(newton)), newton, root)
    return tf.cast(float_sign(xc) * root, x.dtype)


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
    low_const, _, high_const = _splats(ctx, op)
    return max_min(False, max_min(True, x, low, None, low_const), high, None, high_const)
