"""Integer arithmetic on dimension sizes, kept symbolic (`symbolic.DimSize` / `ShapeVector`).

JAX computes the shapes of a polymorphic module with ordinary StableHLO ops on the dimension
variables: `get_dimension_size`, `multiply`, `divide` and `remainder` for `b // 2`, `compare`
and `select` for `max(b, 1)`, `reshape` + `concatenate` to build shape vectors. Folded here:
static sizes give Python ints (no op in the graph); run-time sizes give `LazyDim`s, built into
the graph only if an op needs them as tensors (JAX's shape assertions and the broadcasts TF
does implicitly never do). Semantics are StableHLO's on the value's integer type: wrapping
add/subtract/multiply, division truncating toward zero, remainder with the dividend's sign.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import symbolic as sym
from tf_ops.plain.program import Op

_BINARY = {
    "stablehlo.add": (lambda a, b: a + b, tf.add),
    "stablehlo.subtract": (lambda a, b: a - b, tf.subtract),
    "stablehlo.multiply": (lambda a, b: a * b, tf.multiply),
    "stablehlo.maximum": (max, tf.maximum),
    "stablehlo.minimum": (min, tf.minimum),
    "stablehlo.divide": (lambda a, b: _trunc_div(a, b), tf.truncatediv),
    "stablehlo.remainder": (lambda a, b: a - _trunc_div(a, b) * b, tf.truncatemod),
}
_COMPARE = {"EQ": (lambda a, b: a == b, tf.equal), "NE": (lambda a, b: a != b, tf.not_equal),
            "LT": (lambda a, b: a < b, tf.less), "LE": (lambda a, b: a <= b, tf.less_equal),
            "GT": (lambda a, b: a > b, tf.greater),
            "GE": (lambda a, b: a >= b, tf.greater_equal)}
_INTEGER_ELEMENTS = ("i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64")


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _wrap(value: int, dtype: tf.DType) -> int:
    if dtype == tf.bool:
        return int(bool(value))
    return int(np.array(value).astype(np.int64).astype(dtype.as_numpy_dtype))


def _scalar(value):
    """A 0-D integer operand as an int or LazyDim; None if it is not one."""
    if isinstance(value, sym.DimSize):
        return value.value
    if isinstance(value, sym.Splat) and not value.shape and (value.dtype.is_integer
                                                             or value.dtype == tf.bool):
        return int(value.value)
    return None


def _vector(value):
    """A 1-D integer operand as a tuple of ints / LazyDims; None if it is not one."""
    if isinstance(value, sym.ShapeVector):
        return tuple(value.dims)
    if isinstance(value, sym.Splat) and len(value.shape) == 1 and isinstance(
            value.shape[0], int) and value.dtype.is_integer:
        return (int(value.value),) * value.shape[0]
    if isinstance(value, tf.Tensor) and value.dtype.is_integer and value.shape.rank == 1:
        static = tf.get_static_value(value)
        if static is not None and value.shape[0] is not None and value.shape[0] <= 8:
            return tuple(int(v) for v in static)
    return None


def _tensor(d, dtype=tf.int32) -> tf.Tensor:
    t = d.tensor() if isinstance(d, sym.LazyDim) else tf.constant(int(d), tf.int32)
    return t if dtype == tf.int32 else tf.cast(t, dtype)


def _lazy(build, dtype: tf.DType) -> sym.DimSize:
    return sym.DimSize(sym.LazyDim(build), dtype)


def fold(op: Op, inputs: list) -> list | None:
    """The results of `op` as symbolic values when it is arithmetic on dimension sizes, else
    None (the op is then lowered to TF ops as usual)."""
    if not op.result_types or op.result_types[0].element not in _INTEGER_ELEMENTS:
        return None
    if not any(isinstance(v, (sym.DimSize, sym.ShapeVector)) for v in inputs):
        return None
    result_type = op.result_types[0]
    dtype = tf.as_dtype(result_type.dtype)
    name = op.name
    if result_type.rank == 0:
        return _fold_scalar(op, name, inputs, dtype)
    if result_type.rank == 1:
        return _fold_vector(op, name, inputs, dtype)
    return None


def _fold_scalar(op, name, inputs, dtype):
    scalars = [_scalar(v) for v in inputs]
    if name == "stablehlo.reshape":  # tensor<1xi32> -> tensor<i32>
        vector = _vector(inputs[0])
        return [sym.DimSize(vector[0], dtype)] if vector is not None and len(vector) == 1 \
            else None
    if any(s is None for s in scalars):
        return None
    static = all(isinstance(s, int) for s in scalars)
    if name in _BINARY:
        python_fn, tf_fn = _BINARY[name]
        a, b = scalars
        if static:
            return [sym.DimSize(_wrap(python_fn(a, b), dtype), dtype)]
        return [_lazy(lambda: tf_fn(_tensor(a, tf.int64), _tensor(b, tf.int64)), dtype)]
    if name == "stablehlo.compare":
        python_fn, tf_fn = _COMPARE[op.attr("comparison_direction")]
        a, b = scalars
        if static:
            return [sym.DimSize(int(python_fn(a, b)), tf.bool)]
        return [_lazy(lambda: tf_fn(_tensor(a, tf.int64), _tensor(b, tf.int64)), tf.bool)]
    if name == "stablehlo.select":
        pred, a, b = scalars
        if isinstance(pred, int):
            return [sym.DimSize(a if pred else b, dtype)]
        return [_lazy(lambda: tf.where(tf.cast(_tensor(pred), tf.bool), _tensor(a),
                                       _tensor(b)), dtype)]
    if name == "stablehlo.convert":
        (a,) = scalars
        return [sym.DimSize(_wrap(a, dtype) if isinstance(a, int) else a, dtype)]
    if name == "stablehlo.negate":
        (a,) = scalars
        return [sym.DimSize(_wrap(-a, dtype), dtype)] if isinstance(a, int) else \
            [_lazy(lambda: -_tensor(a), dtype)]
    return None


def _fold_vector(op, name, inputs, dtype):
    if name == "stablehlo.reshape":  # tensor<i32> -> tensor<1xi32>
        scalar = _scalar(inputs[0])
        return [sym.ShapeVector((scalar,), dtype)] if scalar is not None else None
    if name == "stablehlo.concatenate":
        parts = [_vector(v) for v in inputs]
        if any(p is None for p in parts):
            return None
        return [sym.ShapeVector(tuple(d for p in parts for d in p), dtype)]
    if name == "stablehlo.slice":
        vector = _vector(inputs[0])
        if vector is None:
            return None
        (start,), (limit,), (stride,) = (op.attr(k) for k in ("start_indices",
                                                              "limit_indices", "strides"))
        return [sym.ShapeVector(vector[start:limit:stride], dtype)]
    if name == "stablehlo.convert":
        vector = _vector(inputs[0])
        return [sym.ShapeVector(vector, dtype)] if vector is not None else None
    return None
