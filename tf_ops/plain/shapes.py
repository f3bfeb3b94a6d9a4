"""Shape-moving StableHLO ops as TF ops: constants, iota, broadcasts, reshapes, transposes,
slices, concatenation, padding, reversal, and the dynamic (symbolic-shape) forms JAX writes for
polymorphic exports, whose output shapes arrive as int tensors computed at run time.

Constants of one value, broadcasts and dimension sizes stay symbolic (symbolic.py): a
broadcast becomes a TF op only where the op that uses it does not broadcast by itself, and a
shape operand only where TF cannot infer the shape (a reshape with one unknown size takes -1).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dim_arithmetic, symbolic as sym
from tf_ops.plain.program import Op


def _dtype(op: Op, i: int = 0) -> tf.DType:
    return tf.as_dtype(op.result_types[i].dtype)


def _static_or(shape_type, runtime: tf.Tensor):
    """The result shape as a list of Python ints where static, else the run-time tensor."""
    if all(d is not None for d in shape_type.shape):
        return list(shape_type.shape)
    return tf.cast(runtime, tf.int32)


def constant(ctx, op):
    value = np.asarray(op.attr("value"))
    dtype = _dtype(op)
    if value.size:
        elements = np.ascontiguousarray(value).reshape(value.size, 1).view(np.uint8)
        if (elements == elements[0]).all():  # bit for bit: 0.0 and -0.0 differ, NaNs match
            return sym.Splat(value.reshape(-1)[0], tuple(value.shape), dtype)
    return tf.constant(value, dtype=dtype)


def iota(ctx, op):
    result = op.result_types[0]
    return _iota(tuple(result.shape), op.attr("iota_dimension"), _dtype(op))


def dynamic_iota(ctx, op, shape):
    return _iota(_shape_dims(op, shape), op.attr("iota_dimension"), _dtype(op))


def _iota(dims: tuple, dimension: int, dtype: tf.DType):
    """0, 1, 2, ... along `dimension`: a constant where the size is static, else `tf.range`
    of the run-time size; either kept symbolic as a broadcast along the other dimensions."""
    size = dims[dimension]
    compute = tf.int32 if dtype.is_integer or dtype == tf.bool else dtype
    if isinstance(size, int):
        values = tf.constant(np.arange(size).astype(dtype.as_numpy_dtype))
    else:
        values = tf.cast(tf.range(sym.materialize(sym.DimSize(size, tf.int32))), compute)
        values = tf.cast(values, dtype) if values.dtype != dtype else values
    if len(dims) == 1:
        return values
    return sym.Broadcast(values, (dimension,), tuple(dims))


def broadcast_in_dim(ctx, op, x):
    result = op.result_types[0].shape
    dims = list(op.attr("broadcast_dimensions"))
    if any(d is None for d in result):  # a symbolic size carried over from the operand
        source = _value_dims(ctx, x)
        result = [source[dims.index(i)] if d is None else d for i, d in enumerate(result)]
    return _broadcast(ctx, x, dims, tuple(result), _repeats_nothing(op, dims))


def dynamic_broadcast_in_dim(ctx, op, x, shape):
    dims = list(op.attr("broadcast_dimensions"))
    return _broadcast(ctx, x, dims, _shape_dims(op, shape), _repeats_nothing(op, dims))


def _repeats_nothing(op: Op, dims: list) -> bool:
    """Whether a broadcast repeats no element: each operand dimension keeps its size, and the
    result's new dimensions are 1s (a reshape, or nothing; no BroadcastTo, whose shape computed
    from the batch Core ML's converter refuses). A dynamic size against a dynamic size is the
    same size: JAX repeats only sizes that are 1, and a symbolic size it broadcasts must be
    definitely equal to the result's (its broadcast_in_dim shape rule)."""
    operand, result = op.operand_types[0].shape, op.result_types[0].shape
    return (len(operand) == len(dims) and all(o == result[d] for o, d in zip(operand, dims))
            and all(result[i] == 1 for i in set(range(len(result))) - set(dims)))


def _shape_dims(op: Op, shape) -> tuple:
    """A shape operand's sizes (ints / LazyDims); static sizes of the result type win."""
    if isinstance(shape, sym.ShapeVector):
        dims = list(shape.dims)
    else:
        shape = sym.materialize(shape)
        dims = [sym.LazyDim(lambda i=i: shape[i]) for i in range(int(shape.shape[0]))]
    result = op.result_types[0].shape
    return tuple(d if d is not None else dims[i] for i, d in enumerate(result))


def _value_dims(ctx, x) -> list:
    if isinstance(x, (sym.Splat, sym.Broadcast)):
        return list(x.shape)
    return ctx.shapes.dims(sym.materialize(x))


def _broadcast(ctx, x, dims: list, shape: tuple, repeats_nothing: bool = False):
    """`x`'s dimension i becomes result dimension dims[i]; the others repeat it (kept
    symbolic: see symbolic.Broadcast). `repeats_nothing`: see `_repeats_nothing`."""
    if isinstance(x, sym.Splat):
        return sym.Splat(x.value, shape, x.dtype)
    if isinstance(x, sym.Broadcast):  # a broadcast of a broadcast: one broadcast of the source
        return sym.Broadcast(x.source, tuple(dims[d] for d in x.dims), shape,
                             x.repeats_nothing and repeats_nothing)
    x = sym.materialize(x)
    known = _small_constant(x)
    if known is not None and all(isinstance(d, int) for d in shape):
        expanded = [1] * len(shape)
        for i, d in enumerate(dims):
            expanded[d] = known.shape[i]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        return tf.constant(np.broadcast_to(
            known.transpose(order).reshape(expanded), shape).copy(), x.dtype)
    if dims == list(range(len(shape))) and (repeats_nothing or (
            x.shape.as_list() == [d if isinstance(d, int) else None for d in shape]
            and all(isinstance(d, int) for d in shape))):
        return x  # the same shape: nothing to repeat
    return sym.Broadcast(x, tuple(dims), shape, repeats_nothing)


def reshape(ctx, op, x):
    shape = list(op.result_types[0].shape)
    if isinstance(x, sym.Splat):
        return sym.Splat(x.value, tuple(shape), x.dtype)
    if isinstance(x, (sym.DimSize, sym.ShapeVector)):
        folded = dim_arithmetic.fold(op, [x])
        if folded is not None:
            return folded
    x = sym.materialize(x)
    known = _small_constant(x)
    if known is not None:
        return tf.constant(known.reshape(shape), x.dtype)
    return tf.reshape(x, shape)


def _small_constant(x):
    """The numpy value of a small Const tensor (indices, masks, tables JAX computed), else
    None: moving it is done at conversion, not in the graph."""
    if tf.executing_eagerly() or not isinstance(x, tf.Tensor) or x.op.type != "Const" \
            or x.shape.num_elements() is None or x.shape.num_elements() > 1 << 16:
        return None
    return tf.get_static_value(x)


def dynamic_reshape(ctx, op, x, shape):
    dims = _shape_dims(op, shape)
    if isinstance(x, sym.Splat):
        return sym.Splat(x.value, dims, x.dtype)
    return tf.reshape(sym.materialize(x), sym.reshape_operand(dims))


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
    return sym.DimSize(_value_dims(ctx, x)[op.attr("dimension")], tf.int32)


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
        if isinstance(interior[d], (int, np.integer)) and interior[d] == 0:
            continue
        x = _interior_pad(x, value, d, interior[d])
    def at_least_0(v):
        return max(int(v), 0) if isinstance(v, (int, np.integer)) else tf.maximum(v, 0)

    paddings = [[at_least_0(low[d]), at_least_0(high[d])] for d in range(rank)]
    if any(not (isinstance(v, int) and v == 0) for row in paddings for v in row):
        if any(not isinstance(v, int) for row in paddings for v in row):
            paddings = tf.stack([tf.stack([tf.cast(v, tf.int32) for v in row])
                                 for row in paddings])
        x = tf.pad(x, paddings, constant_values=value)
    begin = [at_least_0(-low[d]) for d in range(rank)]
    crop_high = [at_least_0(-high[d]) for d in range(rank)]
    if any(not (isinstance(v, int) and v == 0) for v in begin + crop_high):
        begin = [tf.cast(v, tf.int32) if not isinstance(v, int) else v for v in begin]
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
