"""Shape-moving StableHLO ops as TF ops: constants, iota, broadcasts, reshapes, transposes,
slices, concatenation, padding, reversal, and the dynamic (symbolic-shape) forms JAX writes for
polymorphic exports, whose output shapes arrive as int tensors computed at run time."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain.program import Op


def _dtype(op: Op, i: int = 0) -> tf.DType:
    return tf.as_dtype(op.result_types[i].dtype)


def _static_or(shape_type, runtime: tf.Tensor):
    """The result shape as a list of Python ints where static, else the run-time tensor."""
    if all(d is not None for d in shape_type.shape):
        return list(shape_type.shape)
    return tf.cast(runtime, tf.int32)


def constant(ctx, op, ):
    value = op.attr("value")
    return tf.constant(np.asarray(value), dtype=_dtype(op))


def iota(ctx, op):
    result = op.result_types[0]
    return _iota(list(result.shape), op.attr("iota_dimension"), _dtype(op))


def dynamic_iota(ctx, op, shape):
    return _iota(tf.cast(shape, tf.int32), op.attr("iota_dimension"), _dtype(op))


def _iota(shape, dimension: int, dtype: tf.DType):
    shape = tf.convert_to_tensor(shape, tf.int32)
    rank = int(shape.shape[0])
    compute = tf.int32 if dtype.is_integer or dtype == tf.bool else dtype
    values = tf.cast(tf.range(shape[dimension]), compute)
    new_shape = tf.tensor_scatter_nd_update(tf.ones([rank], tf.int32), [[dimension]],
                                            [shape[dimension]])
    values = tf.reshape(values, new_shape)
    return tf.cast(tf.broadcast_to(values, shape), dtype)


def broadcast_in_dim(ctx, op, x):
    return _broadcast(x, op.attr("broadcast_dimensions"), list(op.result_types[0].shape))


def dynamic_broadcast_in_dim(ctx, op, x, shape):
    return _broadcast(x, op.attr("broadcast_dimensions"), tf.cast(shape, tf.int32))


def _broadcast(x, dims, shape):
    """`x`'s dimension i becomes result dimension dims[i]; others are broadcast."""
    dims = list(dims)
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = tf.transpose(x, order)
        dims = [dims[i] for i in order]
    shape_tensor = tf.convert_to_tensor(shape, tf.int32)
    rank = int(shape_tensor.shape[0])
    x_dims = tf.shape(x, out_type=tf.int32)
    expanded = tf.tensor_scatter_nd_update(tf.ones([rank], tf.int32),
                                           [[d] for d in dims], x_dims) if dims else \
        tf.ones([rank], tf.int32)
    return tf.broadcast_to(tf.reshape(x, expanded), shape)


def reshape(ctx, op, x):
    return tf.reshape(x, list(op.result_types[0].shape))


def dynamic_reshape(ctx, op, x, shape):
    return tf.reshape(x, tf.cast(shape, tf.int32))


def transpose(ctx, op, x):
    return tf.transpose(x, op.attr("permutation"))


def slice_(ctx, op, x):
    return tf.strided_slice(x, op.attr("start_indices"), op.attr("limit_indices"),
                            op.attr("strides"))


def real_dynamic_slice(ctx, op, x, start, limit, strides):
    return tf.strided_slice(x, tf.cast(start, tf.int32), tf.cast(limit, tf.int32),
                            tf.cast(strides, tf.int32))


def concatenate(ctx, op, *xs):
    return tf.concat(list(xs), axis=op.attr("dimension"))


def reverse(ctx, op, x):
    dims = op.attr("dimensions")
    return tf.reverse(x, dims) if dims else x


def get_dimension_size(ctx, op, x):
    return tf.shape(x, out_type=tf.int32)[op.attr("dimension")]


def pad(ctx, op, x, value):
    return _pad(x, value, op.attr("edge_padding_low"), op.attr("edge_padding_high"),
                op.attr("interior_padding"))


def dynamic_pad(ctx, op, x, value, low, high, interior):
    return _pad(x, value, tf.unstack(tf.cast(low, tf.int32)),
                tf.unstack(tf.cast(high, tf.int32)), tf.unstack(tf.cast(interior, tf.int32)))


def _pad(x, value, low, high, interior):
    """Interior padding first (values between elements), then edges; a negative edge crops."""
    rank = x.shape.rank
    for d in range(rank):
        if isinstance(interior[d], int) and interior[d] == 0:
            continue
        x = _interior_pad(x, value, d, interior[d])
    paddings = [[tf.maximum(low[d], 0), tf.maximum(high[d], 0)] for d in range(rank)]
    if all(isinstance(v, int) for d in range(rank) for v in (low[d], high[d])):
        paddings = [[max(low[d], 0), max(high[d], 0)] for d in range(rank)]
    if any(not (isinstance(v, int) and v == 0) for row in paddings for v in row):
        x = tf.pad(x, paddings, constant_values=value)
    begin = [tf.maximum(-low[d], 0) if not isinstance(low[d], int) else max(-low[d], 0)
             for d in range(rank)]
    crop_high = [tf.maximum(-high[d], 0) if not isinstance(high[d], int) else max(-high[d], 0)
                 for d in range(rank)]
    if any(not (isinstance(v, int) and v == 0) for v in begin + crop_high):
        sizes = tf.shape(x, out_type=tf.int32)
        end = [sizes[d] - crop_high[d] for d in range(rank)]
        x = tf.strided_slice(x, tf.stack(begin) if begin else [], tf.stack(end) if end else [])
    return x


def _interior_pad(x, value, d, k):
    """`k` copies of `value` between consecutive elements along dimension `d`."""
    n = tf.shape(x, out_type=tf.int32)[d]
    rank = x.shape.rank
    to_front = [d] + [i for i in range(rank) if i != d]
    moved = tf.transpose(x, to_front) if d else x
    rest = tf.shape(moved, out_type=tf.int32)[1:]
    filler = tf.fill(tf.concat([[n, k], rest], 0), tf.cast(value, x.dtype))
    joined = tf.concat([tf.expand_dims(moved, 1), filler], axis=1)
    flat = tf.reshape(joined, tf.concat([[n * (k + 1)], rest], 0))
    flat = flat[:tf.maximum(n * (k + 1) - k, 0)]
    back = [to_front.index(i) for i in range(rank)]
    return tf.transpose(flat, back) if d else flat


def optimization_barrier(ctx, op, *xs):
    return [tf.identity(x) for x in xs]
