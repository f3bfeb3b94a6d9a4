"""Forms JAX writes for one TF op, found by their structure and raised to that op.

- ReLU: `maximum(x, broadcast(+0.0))` (jax.nn.relu) -> `raised.relu` (TF's Relu, which
  gives +0.0 for -0.0 and propagates NaN as StableHLO's maximum does); ReLU6:
  `minimum(relu(x), 6)` -> `raised.relu6`.
- softmax over one axis: `exp(x - max(x)) / sum(exp(x - max(x)))` as jax.nn.softmax writes it
  (the max possibly clamped by `maximum(-inf, .)`) -> `raised.softmax`; log_softmax:
  `(x - max) - log(sum(exp(x - max)))` -> `raised.log_softmax`.
- sigmoid: `1 / (1 + exp(-x))` (lax.logistic) -> `raised.sigmoid`.
- mean: `reduce_sum(x, dims) / n` with n the number of reduced elements -> `raised.mean`.
- exact GELU: `(0.5 * x) * erfc(-x * 0.70710677)` (jax.nn.gelu(approximate=False), its erfc
  already raised by kernels.py) -> `raised.gelu`, which TF runs as `0.5 * x * (erf(x / sqrt 2)
  + 1)`: the form TFLite fuses into one GELU and tf2onnx, Core ML and TF.js take (none of them
  has Erfc). It differs from JAX's erfc form only where x is very negative and the result is
  below 2^-24 * |x| (docs/exactness.md).
- average pooling over H and W of NHWC: `reduce_window(x, 0, add) / n` (flax's `avg_pool`,
  count_include_pad=True: n the window size; with padding, the zeros padded explicitly) or
  `/ reduce_window(ones)` (count_include_pad=False, VALID or TF's SAME padding: the count of
  the window's elements inside x, which is what TF's AvgPool divides by) -> `raised.avg_pool`.
  Where neither holds (e.g. count_include_pad=True with TF's SAME padding and no explicit pad)
  the form stays: TF's SAME AvgPool would divide by another count.

Each match must be closed: the values inside the form feed only the form, so removing its ops
changes nothing else. Broadcasts between the pieces may be static or dynamic and nested.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tf_ops.plain.program import Op, Program, Region
from tf_ops.plain.rewrite import graph
from tf_ops.plain.windowed_view import Window

_BROADCASTS = ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim")
_FLOATS = ("f16", "bf16", "f32", "f64")
# Element types whose TF kernels were measured within the contract's bound of JAX's formula
# (tools/kernel_bounds.py: sigmoid; softmax and mean by the differential fuzzer).
_MEASURED = ("f32",)
_SIGMOID_MEASURED = ("f16", "bf16", "f32")


def raise_patterns(program: Program) -> Program:
    return graph.map_regions(program, _raise_region)


class _Match:
    """Reads one region's values through broadcasts and constants, and records the ops a
    pattern consumed."""

    def __init__(self, g: graph.RegionGraph):
        self.g = g
        self.ops: set = set()

    def producer(self, value, name: str) -> Op | None:
        op = self.g.op(value)
        if op is None or op.name != name:
            return None
        self.ops.add(self.g.producer[value])
        return op

    def unbroadcast(self, value, consume: bool = True):
        """(source, dims): `value` as a broadcast of `source` (dims: where each source dim
        lands), through any chain of broadcast_in_dim ops; (value, None) if not one. The
        broadcasts are consumed unless `consume` is False."""
        dims = None
        while True:
            op = self.g.op(value)
            if op is None or op.name not in _BROADCASTS:
                return value, dims
            if consume:
                self.ops.add(self.g.producer[value])
            inner = list(op.attr("broadcast_dimensions"))
            dims = inner if dims is None else [dims[d] for d in inner]
            value = op.operands[0]

    def splat(self, value):
        """The scalar `value` holds everywhere (a constant, possibly broadcast), or None.
        Constants and their broadcasts are not consumed: others may share them, and dead ones
        go with dead_code."""
        source, _ = self.unbroadcast(value, consume=False)
        op = self.g.op(source)
        if op is None or op.name != "stablehlo.constant":
            return None
        flat = np.asarray(op.attr("value")).reshape(-1)
        if not flat.size or not (flat.view(np.uint8).reshape(flat.size, -1)
                                 == flat[:1].view(np.uint8)).all():
            return None
        return flat[0]

    def closed(self, root: int) -> bool:
        """Whether the consumed ops' values feed only consumed ops (the root's excepted)."""
        for i in self.ops - {root}:
            for r in self.g.region.ops[i].results:
                if any(u is None or u not in self.ops for u in self.g.users.get(r, [])):
                    return False
        return True


def _is_zero(value) -> bool:
    return value is not None and value == 0 and not np.signbit(value)


def _raised(op: Op, name: str, operands: tuple, operand_types: tuple, **attrs) -> Op:
    return dataclasses.replace(op, name=name, operands=operands, operand_types=operand_types,
                               attrs=attrs, regions=())


def _float_result(op: Op, elements=_FLOATS) -> bool:
    return len(op.result_types) == 1 and op.result_types[0].element in elements


# ------------------------------------------------------------------------ the patterns

def _relu(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.maximum" or not _float_result(op):
        return None
    for x, c in (op.operands, op.operands[::-1]):
        m = _Match(g)
        m.ops.add(i)
        if _is_zero(m.splat(c)) and m.closed(i):
            return _raised(op, "raised.relu", (x,), (op.result_types[0],)), m.ops - {i}
    return None


def _relu6(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.minimum" or not _float_result(op):
        return None
    for r, c in (op.operands, op.operands[::-1]):
        m = _Match(g)
        m.ops.add(i)
        if m.splat(c) != 6:
            continue
        inner = m.producer(r, "raised.relu")
        if inner is not None and m.closed(i):
            return (_raised(op, "raised.relu6", inner.operands, inner.operand_types),
                    m.ops - {i})
    return None


def _max_reduction(m: _Match, value, rank: int):
    """(x, axis) if `value` broadcasts back jnp.max(x, axis) (optionally maximum(-inf, .))
    along one axis, else None."""
    source, dims = m.unbroadcast(value)
    if dims is None:
        return None
    clamp = m.producer(source, "stablehlo.maximum")
    if clamp is not None:
        a, b = clamp.operands
        if m.splat(a) == -np.inf:
            source = b
        elif m.splat(b) == -np.inf:
            source = a
        else:
            return None
    reduce = m.producer(source, "stablehlo.reduce")
    return _single_axis_reduce(m, reduce, "stablehlo.maximum", -np.inf, dims, rank)


def _single_axis_reduce(m: _Match, reduce: Op | None, body_op: str, init, dims, rank: int):
    """(x, axis) when `reduce` is x reduced by `body_op` over one axis from `init`, and `dims`
    broadcasts its result back over that axis (the other dims in order)."""
    if reduce is None or len(reduce.operands) != 2:
        return None
    axes = list(reduce.attr("dimensions"))
    if len(axes) != 1:
        return None
    (axis,) = axes
    kept = [d for d in range(rank) if d != axis]
    if dims is not None and list(dims) != kept:
        return None
    body = reduce.regions[0]
    if len(body.ops) != 1 or body.ops[0].name != body_op:
        return None
    if m.splat(reduce.operands[1]) != init:
        return None
    return reduce.operands[0], axis


def _shifted_by_max(m: _Match, value, rank: int):
    """(x, axis) when `value` is x - max(x) along one axis (broadcast back), as JAX writes the
    stable softmax and log_softmax; else None."""
    shifted = m.producer(value, "stablehlo.subtract")
    if shifted is None:
        return None
    x, max_value = shifted.operands
    found = _max_reduction(m, max_value, rank)
    if found is None or found[0] != x:
        return None
    return x, found[1]


def _softmax(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.divide" or not _float_result(op, _MEASURED):
        return None
    m = _Match(g)
    m.ops.add(i)
    rank = op.result_types[0].rank
    numerator, denominator = op.operands
    exp = m.producer(numerator, "stablehlo.exponential")
    found = _shifted_by_max(m, exp.operands[0], rank) if exp else None
    if found is None:
        return None
    x, axis = found
    total, dims = m.unbroadcast(denominator)
    reduce = m.producer(total, "stablehlo.reduce")
    summed = _single_axis_reduce(m, reduce, "stablehlo.add", 0.0, dims, rank)
    if summed != (numerator, axis) or not m.closed(i):
        return None
    return (_raised(op, "raised.softmax", (x,), (op.result_types[0],), axis=axis),
            m.ops - {i})


def _log_softmax(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.subtract" or not _float_result(op, _MEASURED):
        return None
    m = _Match(g)
    m.ops.add(i)
    rank = op.result_types[0].rank
    shifted_value, log_value = op.operands
    found = _shifted_by_max(m, shifted_value, rank)
    if found is None:
        return None
    x, axis = found
    log_source, outer_dims = m.unbroadcast(log_value)
    log = m.producer(log_source, "stablehlo.log")
    if log is None:
        return None
    total, inner_dims = m.unbroadcast(log.operands[0])
    if inner_dims is None or outer_dims is None:
        return None
    reduce = m.producer(total, "stablehlo.reduce")
    summed = _single_axis_reduce(m, reduce, "stablehlo.add", 0.0,
                                 [outer_dims[d] for d in inner_dims], rank)
    if summed is None:
        return None
    exp = m.producer(summed[0], "stablehlo.exponential")
    if exp is None or exp.operands[0] != shifted_value or summed[1] != axis \
            or not m.closed(i):
        return None
    return (_raised(op, "raised.log_softmax", (x,), (op.result_types[0],), axis=axis),
            m.ops - {i})


def _sigmoid(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.divide" or not _float_result(op, _SIGMOID_MEASURED):
        return None
    m = _Match(g)
    m.ops.add(i)
    one, denominator = op.operands
    if m.splat(one) != 1:
        return None
    add = m.producer(denominator, "stablehlo.add")
    if add is None:
        return None
    for c, e in (add.operands, add.operands[::-1]):
        m2 = _Match(g)
        m2.ops |= m.ops
        if m2.splat(c) != 1:
            continue
        exp = m2.producer(e, "stablehlo.exponential")
        neg = m2.producer(exp.operands[0], "stablehlo.negate") if exp else None
        if neg is not None and m2.closed(i):
            return (_raised(op, "raised.sigmoid", neg.operands, neg.operand_types),
                    m2.ops - {i})
    return None


def _mean(g, i):
    """jnp.mean: a sum divided by the element count, with keepdims=True as well (the sum
    broadcast back over the reduced axes before the division)."""
    op = g.region.ops[i]
    if op.name != "stablehlo.divide" or not _float_result(op, _MEASURED):
        return None
    m = _Match(g)
    m.ops.add(i)
    total, count = op.operands
    n = m.splat(count)
    total, dims = m.unbroadcast(total)
    reduce = m.producer(total, "stablehlo.reduce")
    if n is None or reduce is None or len(reduce.operands) != 2:
        return None
    body = reduce.regions[0]
    if len(body.ops) != 1 or body.ops[0].name != "stablehlo.add" \
            or m.splat(reduce.operands[1]) != 0:
        return None
    shape = reduce.operand_types[0].shape
    axes = sorted(int(a) for a in reduce.attr("dimensions"))
    sizes = [shape[a] for a in axes]
    if any(s is None for s in sizes) or n != float(np.prod(sizes)):
        return None
    keepdims = dims is not None
    if keepdims:
        result = op.result_types[0].shape
        kept = [d for d in range(len(shape)) if d not in axes]
        if list(dims) != kept or len(result) != len(shape) \
                or any(result[a] != 1 for a in axes):
            return None
    if not m.closed(i):
        return None
    return (_raised(op, "raised.mean", reduce.operands[:1], reduce.operand_types[:1],
                    axes=axes, keepdims=keepdims), m.ops - {i})


def _gelu(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.multiply" or not _float_result(op, _GELU_MEASURED):
        return None
    for half_value, erfc_value in (op.operands, op.operands[::-1]):
        m = _Match(g)
        m.ops.add(i)
        half = m.producer(half_value, "stablehlo.multiply")
        erfc = m.producer(erfc_value, "raised.unary")
        if half is None or erfc is None or erfc.attr("kernel") != "Erfc":
            continue
        x = _times_constant(m, half, 0.5)
        scaled = m.producer(erfc.operands[0], "stablehlo.multiply")
        if x is None or scaled is None:
            continue
        negated = _times_constant(m, scaled, np.float32(_SQRT_HALF))
        neg = m.producer(negated, "stablehlo.negate") if negated is not None else None
        if neg is None or neg.operands[0] != x or not m.closed(i):
            continue
        return _raised(op, "raised.gelu", (x,), (op.result_types[0],)), m.ops - {i}
    return None


_SQRT_HALF = 0.7071067811865476
_GELU_MEASURED = ("f32",)


def _times_constant(m: _Match, op: Op, constant) -> int | None:
    """The other operand of `op` (a multiply) when one operand is the splat `constant` in the
    op's type, else None."""
    for a, b in (op.operands, op.operands[::-1]):
        value = m.splat(b)
        if value is not None and value == np.asarray(constant).astype(value.dtype):
            return a
    return None


def _sum_pool(m: _Match, value):
    """(x, x's shape, window) when `value` sums 2-D windows of NHWC x from 0 (no dilation,
    static H and W, at least one window along each), else None."""
    pool = m.producer(value, "stablehlo.reduce_window")
    if pool is None or len(pool.operands) != 2 or m.splat(pool.operands[1]) != 0:
        return None
    body = pool.regions[0]
    if len(body.ops) != 1 or body.ops[0].name != "stablehlo.add" \
            or pool.operand_types[0].rank != 4:
        return None
    window = Window.of(pool, 4)
    if any(d != 1 for d in window.base_dilations + window.window_dilations) \
            or any([window.dims[d], window.strides[d]] != [1, 1] or window.padding[d] != [0, 0]
                   for d in (0, 3)):
        return None
    shape = pool.operand_types[0].shape
    if any(shape[d] is None or min(window.padding[d]) < 0
           or shape[d] + sum(window.padding[d]) < window.dims[d] for d in (1, 2)):
        return None
    return pool.operands[0], shape, window


def _same_padding(shape, window: Window) -> bool:
    """Whether the window's padding of H and W is TF's SAME padding (static sizes)."""
    for d in (1, 2):
        size, extent, stride = shape[d], window.dims[d], window.strides[d]
        total = max((-(-size // stride) - 1) * stride + extent - size, 0)
        if window.padding[d] != [total // 2, total - total // 2]:
            return False
    return True


def _avg_pool(g, i):
    op = g.region.ops[i]
    if op.name != "stablehlo.divide" or not _float_result(op, _MEASURED):
        return None
    m = _Match(g)
    m.ops.add(i)
    found = _sum_pool(m, op.operands[0])
    if found is None:
        return None
    x, x_shape, window = found
    padded = any(p != [0, 0] for p in window.padding)
    count = m.splat(op.operands[1])
    if count is not None:  # count_include_pad: every window divided by its size
        if count != np.prod(window.dims):
            return None
        padding = "EXPLICIT" if padded else "VALID"
    else:  # divided by the count of x's elements in each window (a pool of ones)
        source, _ = m.unbroadcast(op.operands[1])
        ones = _sum_pool(m, source)
        if ones is None or ones[2] != window or m.splat(ones[0]) != 1:
            return None
        if not padded:
            padding = "VALID"
        elif _same_padding(x_shape, window):
            padding = "SAME"
        else:
            return None
    if not m.closed(i):
        return None
    return (_raised(op, "raised.avg_pool", (x,), (op.result_types[0],), ksize=window.dims,
                    strides=window.strides, padding=padding, pads=window.padding),
            m.ops - {i})


_PATTERNS = (_softmax, _log_softmax, _sigmoid, _mean, _relu, _avg_pool)
_SECOND_PASS = (_relu6, _gelu)


def _raise_region(region: Region) -> Region:
    for patterns in (_PATTERNS, _SECOND_PASS):
        region = _apply(region, patterns)
    return region


def _apply(region: Region, patterns) -> Region:
    g = graph.RegionGraph.of(region)
    replacements, removed = {}, set()
    for i in range(len(region.ops) - 1, -1, -1):
        if i in removed:
            continue
        for pattern in patterns:
            found = pattern(g, i)
            if found is None:
                continue
            raised, consumed = found
            if consumed & (removed | set(replacements)):
                continue
            replacements[i] = raised
            removed |= consumed
            break
    return graph.replace_ops(region, replacements, removed) if replacements else region
