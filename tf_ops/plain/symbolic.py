"""Values the lowering keeps symbolic until an op needs a tensor.

JAX's exported modules spend most of their ops on shapes: every broadcast of a constant or a
bias is `get_dimension_size` -> `reshape` -> `concatenate` -> `dynamic_broadcast_in_dim` when
a dimension is symbolic, and a scalar constant is first broadcast to the full shape. A TF
engineer writes `x * 0.5` and `x + bias` and lets TF's binary ops broadcast. So the lowering
keeps these values symbolic:

- `DimSize`: a 0-D integer that is a dimension size (`get_dimension_size`, a dimension
  variable, or arithmetic on them): a Python int where static, else read from the tensor's
  shape only when an op needs it, once per tensor (`ShapeCache`).
- `ShapeVector`: a 1-D integer vector of dimension sizes (the shape operand of the dynamic ops).
- `Splat`: a constant of one value, of any shape: a scalar to TF's broadcasting ops.
- `Broadcast`: `broadcast_in_dim` of a tensor: to TF's broadcasting ops the tensor itself
  (reshaped only where numpy's trailing alignment does not already line it up).

`materialize` turns any of them into a tensor (what every op that does not broadcast gets);
`broadcastable` gives the operands of an elementwise op in the form TF's implicit broadcasting
takes, which is exact: StableHLO's elementwise ops have operands of the result's shape, and a
broadcast copies values, so TF's broadcasting computes the same elements.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, Union

import numpy as np
import tensorflow as tf

class LazyDim:
    """A dimension size known only at run time, built into the graph the first time an op
    needs it as a tensor (`tensor()`), then reused: a symbolic size that only feeds shapes TF
    infers by itself (implicit broadcasting, a reshape's -1) costs no op at all."""

    def __init__(self, build):
        self._build = build
        self._tensors: dict = {}  # per graph: a loop body or branch builds its own, once

    def tensor(self) -> tf.Tensor:
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._tensors:
            built = self._build()
            self._tensors[graph] = built if built.dtype == tf.int32 else tf.cast(built, tf.int32)
        return self._tensors[graph]


Dim = Union[int, LazyDim]  # a dimension size: a static int, or built when needed


class ShapeCache:
    """`tf.shape` of each tensor, built once per tensor and graph (dimension arithmetic is
    then computed once per input, not once per op that needs a size)."""

    def __init__(self):
        self._shapes: dict = {}

    def dims(self, x: tf.Tensor) -> list[Dim]:
        """The sizes of `x`'s dimensions: ints where static, `LazyDim`s otherwise (all of one
        tensor share one `tf.shape`)."""
        static = x.shape.as_list()
        if all(d is not None for d in static):
            return static
        key = x.ref()
        entry = self._shapes.get(key)
        if entry is None:
            entry = self._shapes[key] = (x, lazy_dims(x))  # x kept alive: refs stay unique
        return list(entry[1])

    def tensors(self, x: tf.Tensor) -> list:
        """`dims(x)` with the run-time sizes as int32 scalar tensors."""
        return [d.tensor() if isinstance(d, LazyDim) else d for d in self.dims(x)]


@dataclasses.dataclass(frozen=True, eq=False)
class DimSize:
    """A 0-D integer value of dtype `dtype` that is a dimension size (int or LazyDim)."""
    value: Dim
    dtype: tf.DType

    @property
    def is_static(self) -> bool:
        return isinstance(self.value, (int, np.integer))


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeVector:
    """A 1-D integer value of dtype `dtype` whose elements are dimension sizes."""
    dims: tuple
    dtype: tf.DType

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, (int, np.integer)) for d in self.dims)


@dataclasses.dataclass(frozen=True, eq=False)
class Splat:
    """A tensor of shape `shape` (ints, or a ShapeVector's dims) whose elements all equal the
    numpy scalar `value`."""
    value: np.generic
    shape: tuple
    dtype: tf.DType


@dataclasses.dataclass(frozen=True, eq=False)
class Broadcast:
    """`broadcast_in_dim(source, dims)` to `shape` (ints or LazyDims): dimension i of
    `source` is dimension dims[i] of the result, every other dimension is repeated.
    `repeats_nothing`: every other dimension is a 1 and the mapped ones keep their sizes, so
    that the full tensor is a reshape of the source (no BroadcastTo, whose shape computed from
    the batch Core ML's converter refuses)."""
    source: tf.Tensor
    dims: tuple
    shape: tuple
    repeats_nothing: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)


Symbolic = (DimSize, ShapeVector, Splat, Broadcast)


def is_symbolic(value) -> bool:
    return isinstance(value, Symbolic)


def _is_int(d) -> bool:
    return isinstance(d, (int, np.integer))


def shape_operand(dims: Sequence[Dim]) -> list[int] | tf.Tensor:
    """A shape for tf.reshape / tf.broadcast_to / tf.fill: a list of ints where static, else one
    int32 vector (stacked from the cached sizes)."""
    if all(_is_int(d) for d in dims):
        return [int(d) for d in dims]
    return tf.stack([d.tensor() if isinstance(d, LazyDim) else tf.constant(int(d), tf.int32)
                     for d in dims])


def reshape_operand(dims: Sequence[Dim]) -> list[int] | tf.Tensor:
    """A shape for tf.reshape: with at most one size unknown, a list of ints with -1 there (no
    shape ops in the graph: TF infers it from the element count, which StableHLO guarantees
    agrees), unless a known size is 0: TF then infers 0 for the -1 whatever the size is."""
    unknown = [i for i, d in enumerate(dims) if not _is_int(d)]
    if not unknown or (len(unknown) == 1 and all(int(d) != 0 for d in dims if _is_int(d))):
        return [-1 if i in unknown else int(d) for i, d in enumerate(dims)]
    return shape_operand(dims)


def materialize(value):
    """Any value as a tensor (tensors pass through); built once per value and graph."""
    if not is_symbolic(value):
        return value
    graph = tf.compat.v1.get_default_graph()
    built = value.__dict__.setdefault("_built", {})  # per graph: reused by its every op
    if graph not in built:
        built[graph] = _build(value)
    return built[graph]


def is_materialized(value, tensor) -> bool:
    """Whether `tensor` is `value` built in full by `materialize` (in the current graph)."""
    built = getattr(value, "__dict__", {}).get("_built", {})
    return is_symbolic(value) and built.get(tf.compat.v1.get_default_graph()) is tensor


def _build(value):
    if isinstance(value, DimSize):
        if value.is_static:
            static = bool(value.value) if value.dtype == tf.bool else int(value.value)
            return tf.constant(static, value.dtype)
        return tf.cast(value.value.tensor(), value.dtype)
    if isinstance(value, ShapeVector):
        if value.is_static:
            return tf.constant([int(d) for d in value.dims], value.dtype, shape=[len(value.dims)])
        return tf.cast(shape_operand(value.dims), value.dtype)
    if isinstance(value, Splat):
        scalar = tf.constant(value.value, value.dtype)
        if not value.shape:
            return scalar
        if all(_is_int(d) for d in value.shape):
            return tf.constant(value.value, value.dtype, shape=[int(d) for d in value.shape])
        return tf.fill(shape_operand(value.shape), scalar)
    source = aligned(value)
    if not value.repeats_nothing:
        return tf.broadcast_to(source, shape_operand(value.shape))
    if source.shape.rank == value.rank:  # aligned has put the 1s in already
        return source
    return tf.reshape(source, reshape_operand(value.shape))


def aligned(b: Broadcast):
    """`b.source` with its dimensions in result order and 1s where the result repeats: the
    operand numpy-style broadcasting needs (the source itself when the dimensions already line
    up from the right)."""
    x, dims = b.source, list(b.dims)
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = tf.transpose(x, order)
        dims = [dims[i] for i in order]
    rank = b.rank
    if dims == list(range(rank - len(dims), rank)):
        return x  # trailing alignment: [c] against [b, h, w, c]
    source_dims = lazy_dims(x)
    expanded = [1] * rank
    for i, d in enumerate(dims):
        expanded[d] = source_dims[i]
    return tf.reshape(x, reshape_operand(expanded))


def lazy_dims(x: tf.Tensor) -> list[Dim]:
    """`x`'s dimension sizes, ints where static; the others read from one `tf.shape(x)` built
    only if one of them is needed as a tensor."""
    static = x.shape.as_list()
    shapes = {}

    def shape():
        graph = tf.compat.v1.get_default_graph()
        if graph not in shapes:
            shapes[graph] = tf.shape(x, out_type=tf.int32)
        return shapes[graph]

    return [d if d is not None else LazyDim(lambda i=i: shape()[i]) for i, d in enumerate(static)]


def broadcastable(values: list) -> list:
    """The operands of an elementwise op, for a TF op that broadcasts them: symbolic operands
    as scalars or aligned sources. Where every operand is symbolic and one is a `Broadcast`,
    none is built in full: the op's result is then itself a broadcast (`broadcast_result`).
    With only splats and sizes, the largest splat is materialized."""
    full = [v for v in values if not is_symbolic(v)]
    if not full and not any(isinstance(v, Broadcast) for v in values):
        splats = [v for v in values if isinstance(v, Splat)]
        if not splats:
            return [materialize(v) for v in values]
        biggest = max(splats, key=lambda v: len(v.shape))
        values = [materialize(v) if v is biggest else v for v in values]
    out = []
    for v in values:
        if isinstance(v, Splat):
            out.append(tf.constant(v.value, v.dtype))
        elif isinstance(v, Broadcast):
            out.append(_bias_shaped(aligned(v)) if full else aligned(v))
        elif isinstance(v, (DimSize, ShapeVector)):
            out.append(materialize(v))
        else:
            out.append(v)
    return out


def _bias_shaped(x: tf.Tensor) -> tf.Tensor:
    """A constant operand without its leading 1s (`[1, c]` -> `[c]`), beside a full operand that
    keeps the result's rank: the bias a TF engineer adds. Grappler's remapper takes
    `AddV2(MatMul, [1, c])` for a bias add and builds a `BiasAdd` that then fails at run time
    ("bias must be 1-dimensional"); a 1-D bias is the form its fusions expect."""
    if tf.executing_eagerly() or x.op.type != "Const":  # eagerly no optimizer runs
        return x
    value = tf.get_static_value(x)
    if value is None or value.ndim < 2 or value.shape[0] != 1:
        return x
    shape = list(value.shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return tf.constant(value.reshape(shape), x.dtype)


def broadcast_result(operands: list, output: tf.Tensor):
    """The result of an elementwise op whose operands were all symbolic, one of them a
    `Broadcast` (`broadcastable` gave their aligned forms): `output`, computed on the aligned
    operands, broadcast to the result's shape. Exact: the op is elementwise and a broadcast
    copies values, so computing before or after the copy gives the same elements. A mask built
    from iotas (`arange(t)[:, None] >= arange(t)`, then a batch) stays its small tensor until
    an op with a full operand broadcasts it, with no BroadcastTo to a computed shape."""
    shape = next(v for v in operands if isinstance(v, Broadcast)).shape
    rank = output.shape.rank
    if rank is None:
        return output
    dims = tuple(range(len(shape) - rank, len(shape)))
    one = lambda d: _is_int(shape[d]) and int(shape[d]) == 1
    # Aligned operands hold a static 1 where they repeat and the result's size elsewhere: the
    # output repeats something only where it has a static 1 (or no dimension) for a result
    # dimension that is not 1.
    repeats = any(not one(d) for d in range(len(shape) - rank)) or any(
        size == 1 and not one(d) for size, d in zip(output.shape.as_list(), dims))
    if not repeats and rank == len(shape):
        return output
    return Broadcast(output, dims, shape, not repeats)


def static_value(value):
    """The numpy value of a value known at conversion (a static DimSize, ShapeVector or Splat,
    or a constant tensor), else None."""
    if isinstance(value, DimSize) and value.is_static:
        return np.asarray(int(value.value), value.dtype.as_numpy_dtype)
    if isinstance(value, ShapeVector) and value.is_static:
        return np.asarray([int(d) for d in value.dims], value.dtype.as_numpy_dtype)
    if isinstance(value, Splat) and all(_is_int(d) for d in value.shape):
        return np.full([int(d) for d in value.shape], value.value, value.dtype.as_numpy_dtype)
    if isinstance(value, tf.Tensor):
        return tf.get_static_value(value)
    return None
