"""The `raised.*` ops the rewrite passes (tf_ops/plain/rewrite) put in place of JAX's
decompositions, each lowered to the one TF op a TF engineer writes for it."""
from __future__ import annotations

import tensorflow as tf

from tf_ops import nan_guards
from tf_ops.plain.program import Op

# The TF kernels `raised.unary` names (rewrite/kernels.py picks them).
_UNARY_KERNELS = {"Erfc": tf.math.erfc, "Erf": tf.math.erf}


def unary(ctx, op: Op, x):
    return _UNARY_KERNELS[op.attr("kernel")](x)


def gelu(ctx, op: Op, x):
    """Exact GELU in the erf form (rewrite/patterns.py says why)."""
    half = tf.constant(0.5, x.dtype)
    root_half = tf.constant(0.7071067811865476, x.dtype)
    return (half * x) * (tf.math.erf(x * root_half) + tf.constant(1, x.dtype))


def relu(ctx, op: Op, x):
    """TF's Relu, written so that Grappler keeps NaN (tf_ops.nan_guards.relu says why)."""
    return nan_guards.relu(x)


def relu6(ctx, op: Op, x):
    return nan_guards.relu6(x)


def sigmoid(ctx, op: Op, x):
    return tf.math.sigmoid(x)


def softmax(ctx, op: Op, x):
    """TF's Softmax, and JAX's NaN rows: where a row's max is NaN or infinite, every element
    of JAX's row is NaN (x - max is NaN somewhere, and the sum is NaN), but TF's kernel
    (oneDNN's on x86) leaves NaN only where its own x - max is NaN. That row's TF sum is then
    NaN, and every other row's sum is at least each of its elements (>= 1 in total), so
    `minimum(y, sum(y))` is y, or NaN across exactly JAX's NaN rows (TF's Minimum propagates
    NaN). Two ops, no Select (which tf2onnx rewrites into arithmetic that NaN poisons)."""
    axis = op.attr("axis")
    y = tf.nn.softmax(x, axis=axis)
    return nan_guards.guarded(y, tf.minimum,
                              lambda: tf.reduce_sum(y, axis=axis, keepdims=True))


def log_softmax(ctx, op: Op, x):
    return tf.nn.log_softmax(x, axis=op.attr("axis"))


def mean(ctx, op: Op, x):
    return tf.reduce_mean(x, axis=list(op.attr("axes")), keepdims=op.attr("keepdims", False))


def avg_pool(ctx, op: Op, x):
    """TF's AvgPool over H and W of NHWC (rewrite/patterns.py says when it equals JAX's
    average): VALID or SAME as TF pads, or the zeros of count_include_pad=True padded first."""
    padding = op.attr("padding")
    if padding == "EXPLICIT":
        x = tf.pad(x, op.attr("pads"))
        padding = "VALID"
    return tf.nn.avg_pool2d(x, op.attr("ksize"), op.attr("strides"), padding)
