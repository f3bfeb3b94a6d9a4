"""Ops computed at conversion instead of in the graph: what a TF engineer's graph would not
hold because the values are known, or because the op's work is less on a broadcast's source.

- Constants in, constants out: an op whose inputs are all known (constants of one value, or
  small constant tensors) runs its own lowering once, eagerly, outside the graph, and its
  result becomes a constant (JAX normalizes constant indices, computes masks and tables of
  iotas in the module; TF's graph gets the values).
- A one-operand elementwise op on a broadcast runs on the broadcast's source and the result
  stays a broadcast (`convert` of a broadcast bias converts the bias, not its copies).

Both run the op's own lowering, so their values are the graph's values bit for bit.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from tf_ops.plain import symbolic
from tf_ops.plain.program import Op, TensorType

# Ops never folded: their inputs are not the whole story (calls, control flow, effects).
_NOT_FOLDED = frozenset({"func.call", "stablehlo.while", "stablehlo.case", "stablehlo.if",
                         "stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng_bit_generator",
                         "stablehlo.optimization_barrier", "stablehlo.composite"})
# Constant tensors folded at most this large (elements in and out): the graph keeps them.
_MAX_ELEMENTS = 1 << 16


def fold(ctx, entry, op: Op, inputs: list) -> list | None:
    """The op's results computed now (constants, or a broadcast of the source's result), or
    None when it must be built in the graph."""
    if entry.elementwise and inputs and all(isinstance(v, symbolic.Splat) for v in inputs):
        return _fold_splats(ctx, entry, op, inputs)
    if entry.elementwise and len(inputs) == 1 and len(op.results) == 1 \
            and isinstance(inputs[0], symbolic.Broadcast):
        return [_through_broadcast(ctx, entry, op, inputs[0])]
    if op.name not in _NOT_FOLDED and not tf.executing_eagerly() and inputs:
        values = [_known(v) for v in inputs]
        if all(v is not None for v in values) and _small(op):
            return _fold_constants(ctx, entry, op, values)
    return None


def _known(value):
    """A constant input's numpy value (a Splat's or a Const op's), else None."""
    if isinstance(value, symbolic.Splat):
        if all(isinstance(d, int) for d in value.shape) \
                and int(np.prod(value.shape)) <= _MAX_ELEMENTS:
            return np.full(value.shape, value.value, value.dtype.as_numpy_dtype)
        return None
    if isinstance(value, tf.Tensor) and value.op.type == "Const" \
            and value.shape.num_elements() is not None \
            and value.shape.num_elements() <= _MAX_ELEMENTS:
        if value.shape.num_elements() == 0:
            # TF's MakeNdarray fails on an empty Const that stores a fill value (np.pad by -1)
            return np.zeros(value.shape.as_list(), value.dtype.as_numpy_dtype)
        return tf.get_static_value(value)
    return None


def _small(op: Op) -> bool:
    for t in op.result_types:
        if t.dtype is None or not t.is_static or int(np.prod(t.shape)) > _MAX_ELEMENTS:
            return False
    return True


def _fold_constants(ctx, entry, op: Op, values: list) -> list:
    with tf.init_scope():
        outputs = entry.emit(ctx, op, *[tf.constant(v) for v in values])
        outputs = [outputs] if not isinstance(outputs, (list, tuple)) else list(outputs)
        arrays = [np.asarray(symbolic.materialize(o).numpy()) for o in outputs]
    return [_constant(a, t) for a, t in zip(arrays, op.result_types)]


def _constant(array: np.ndarray, result: TensorType):
    dtype = tf.as_dtype(result.dtype)
    array = array.astype(result.dtype).reshape(result.shape)
    if array.size:
        rows = np.ascontiguousarray(array).reshape(array.size, 1).view(np.uint8)
        if (rows == rows[0]).all():
            return symbolic.Splat(array.reshape(-1)[0], tuple(result.shape), dtype)
    return tf.constant(array, dtype)


def _fold_splats(ctx, entry, op: Op, inputs: list) -> list:
    """An elementwise op on constants of one value each: its own lowering run once on the
    scalars, giving constants of one value."""
    with tf.init_scope():
        scalars = [tf.constant(v.value, v.dtype) for v in inputs]
        outputs = entry.emit(ctx, op, *scalars)
        outputs = [outputs] if not isinstance(outputs, (list, tuple)) else list(outputs)
        values = [np.asarray(symbolic.materialize(o).numpy()).reshape(-1)[0] for o in outputs]
    shape = max((v.shape for v in inputs), key=len)
    return [symbolic.Splat(value, shape, tf.as_dtype(t.dtype))
            for value, t in zip(values, op.result_types)]


def _through_broadcast(ctx, entry, op: Op, value: symbolic.Broadcast):
    """A one-operand elementwise op on a broadcast: applied to the broadcast's source (fewer
    elements), the result broadcast the same way (and still symbolic)."""
    source = value.source
    shape = tuple(source.shape.as_list())
    result = op.result_types[0]
    on_source = dataclasses.replace(
        op, operand_types=(TensorType(shape, op.operand_types[0].element,
                                      op.operand_types[0].dtype),),
        result_types=(TensorType(shape, result.element, result.dtype),))
    outputs = entry.emit(ctx, on_source, source)
    output = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
    return symbolic.Broadcast(symbolic.materialize(output), value.dims, value.shape,
                              value.repeats_nothing)
