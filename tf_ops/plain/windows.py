"""Windowed ops as TF ops: `reduce_window` (pooling, cumulative sums/products/max/min/logsumexp,
JAX's select_and_gather_add) and `select_and_scatter` (the max-pool gradient).

Both work on a windowed view built from strided slices: the operand is base-dilated and padded
(negative padding crops), and window position (i, j, ...) reads
`padded[i*dil::stride, j*dil::stride, ...]`. reduce_window folds the positions in window order,
`acc = init; acc = body(acc, x_0); acc = body(acc, x_1); ...`, as XLA's CPU backend does, and
like it skips positions in the padding or in base-dilation holes (the init counts once per
window: with a non-identity init this differs from reducing init-valued padding, and JAX on CPU
gives the former). The body's own elementwise ops run on whole tensors, so NaN, integer and
total-order semantics are the elementwise lowering's. Up to `_UNROLLED` positions are unrolled;
more run in a `tf.while_loop`. Strided positions are unit-stride slices of the operand
reshaped [L / s, s] (TF's StridedSlice with strides > 1 is slow on CPU). Float max pools over
two dimensions of a rank-4 operand run as TF's MaxPool, NaN restored. Cumulative windows (JAX's cumsum/cumprod/cummax/cummin on CPU:
one axis with window = its length and padding [n-1, 0] or [0, n-1]) use `tf.cumsum` /
`tf.math.cumprod` (not for f16/bf16, which XLA rounds after every step: those fold), or
log-step doubling for max/min/and/or, then combine with the init once.

select_and_scatter picks, per window, the first position in window order and then moves on
whenever the select body says "keep" no longer holds (GE: the first maximum), never selecting
padding, then combines each window's source value into its selected position with the scatter
body, in XLA's order (so f16/bf16 sums round after every step as XLA's do). Select and scatter
bodies must be elementwise (JAX writes compare and add/or).
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain.errors import unsupported
from tf_ops.plain.program import Op, Region, TensorType

# More window positions than this run in a tf.while_loop instead of one slice each.
_UNROLLED = 64

# Ops a window body may hold: elementwise, so running them on whole tensors instead of
# scalars computes every window at once.
_ELEMENTWISE = frozenset("stablehlo." + name for name in (
    "add subtract multiply divide remainder maximum minimum power atan2 and or xor not "
    "shift_left shift_right_logical shift_right_arithmetic popcnt count_leading_zeros negate "
    "abs sign exponential exponential_minus_one log log_plus_one logistic sqrt rsqrt cbrt "
    "tanh sine cosine tan floor ceil round_nearest_even round_nearest_afz is_finite real imag "
    "complex compare select clamp convert reduce_precision constant").split())

# Bodies whose fold can be regrouped freely (associative, commutative, idempotent).
_IDEMPOTENT = frozenset({"stablehlo.maximum", "stablehlo.minimum", "stablehlo.and",
                         "stablehlo.or"})


@dataclasses.dataclass(frozen=True)
class _Window:
    """A window's geometry, one entry per operand dimension."""
    dims: list
    strides: list
    base_dilations: list
    window_dilations: list
    padding: list  # [[low, high], ...]

    @classmethod
    def of(cls, op: Op, rank: int) -> "_Window":
        padding = op.attr("padding")
        return cls(dims=list(op.attr("window_dimensions")),
                   strides=list(op.attr("window_strides", None) or [1] * rank),
                   base_dilations=list(op.attr("base_dilations", None) or [1] * rank),
                   window_dilations=list(op.attr("window_dilations", None) or [1] * rank),
                   padding=[[int(lo), int(hi)] for lo, hi in padding] if padding is not None
                   else [[0, 0]] * rank)

    @property
    def positions(self) -> int | tf.Tensor:
        if all(_is_int(d) for d in self.dims):
            return int(np.prod(self.dims, dtype=np.int64))
        return tf.reduce_prod(_vector(self.dims))

    @property
    def is_static(self) -> bool:
        return all(_is_int(v) for v in self.dims + self.strides + self.base_dilations
                   + self.window_dilations + [v for row in self.padding for v in row])


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer))


def _max0(value):
    return max(int(value), 0) if _is_int(value) else tf.maximum(value, 0)


def _maybe_nonzero(value) -> bool:
    return not _is_int(value) or value != 0


# ------------------------------------------------------------------------ bodies

def _body_reason(region: Region) -> str | None:
    defined = set(region.args)
    for body_op in region.ops:
        if body_op.name not in _ELEMENTWISE:
            return f"its body holds {body_op.name}, which is not elementwise"
        if any(v not in defined for v in body_op.operands):
            return "its body uses a value from outside the body"
        defined.update(body_op.results)
    return None


def _broadened(region: Region, rank: int) -> list[Op]:
    """The body's ops with results of unknown size at `rank`: the interpreter then checks
    only the rank of what they build from whole tensors."""
    ops = []
    for body_op in region.ops:
        types = tuple(TensorType((None,) * (0 if body_op.name == "stablehlo.constant" else rank),
                                 t.element, t.dtype) for t in body_op.result_types)
        ops.append(dataclasses.replace(body_op, result_types=types))
    return ops


def _run_body(ctx, region: Region, ops: list[Op], values: list[tf.Tensor]) -> list[tf.Tensor]:
    env = dict(zip(region.args, values))
    for body_op in ops:
        outputs = ctx.emit(body_op, [env[v] for v in body_op.operands])
        env.update(zip(body_op.results, outputs))
    return [env[v] for v in region.returns]


def _single_op(region: Region) -> str | None:
    """The op name of a body `return op(arg0, arg1)` (either order), else None."""
    if len(region.ops) != 1 or len(region.args) != 2:
        return None
    body_op = region.ops[0]
    if sorted(body_op.operands) != sorted(region.args) or region.returns != body_op.results:
        return None
    return body_op.name


# ------------------------------------------------------------------------ windowed view

def dim_sizes(x: tf.Tensor) -> list:
    """Static ints where known, run-time int32 scalars otherwise."""
    static = x.shape.as_list()
    if all(d is not None for d in static):
        return static
    dynamic = tf.shape(x, out_type=tf.int32)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def _vector(values) -> list | tf.Tensor:
    if all(_is_int(v) for v in values):
        return [int(v) for v in values]
    return tf.stack([tf.cast(v, tf.int32) for v in values])


def interleave(x: tf.Tensor, axis: int, factor, fill: tf.Tensor) -> tf.Tensor:
    """`factor - 1` copies of scalar `fill` between neighbours along `axis` (`factor` an int
    or an int32 scalar)."""
    sizes = dim_sizes(x)
    filler = tf.fill(_vector(sizes[:axis + 1] + [factor - 1] + sizes[axis + 1:]), fill)
    joined = tf.concat([tf.expand_dims(x, axis + 1), filler], axis=axis + 1)
    joined = tf.reshape(joined, _vector(sizes[:axis] + [sizes[axis] * factor]
                                        + sizes[axis + 1:]))
    keep = _max0(sizes[axis] * factor - (factor - 1))
    begin = [0] * x.shape.rank
    end = sizes[:axis] + [keep] + sizes[axis + 1:]
    return tf.strided_slice(joined, begin, _vector(end))


def _padded(x: tf.Tensor, fill: tf.Tensor, window: _Window) -> tf.Tensor:
    """`x` base-dilated and padded with `fill`, as the window sees it (sizes may be int32
    scalars computed at run time)."""
    for axis, factor in enumerate(window.base_dilations):
        if not _is_int(factor) or factor > 1:
            x = interleave(x, axis, factor, fill)
    pads = [[_max0(lo), _max0(hi)] for lo, hi in window.padding]
    if any(_maybe_nonzero(v) for row in pads for v in row):
        rows = pads if all(_is_int(v) for row in pads for v in row) else \
            tf.stack([_vector(row) for row in pads])
        x = tf.pad(x, rows, constant_values=fill)
    crops = [(_max0(-lo), _max0(-hi)) for lo, hi in window.padding]
    if any(_maybe_nonzero(c) for pair in crops for c in pair):
        sizes = dim_sizes(x)
        end = [s - hi for s, (_, hi) in zip(sizes, crops)]
        end = [max(e, lo) if _is_int(e) and _is_int(lo) else tf.maximum(e, lo)
               for e, (lo, _) in zip(end, crops)]
        x = tf.strided_slice(x, _vector([lo for lo, _ in crops]), _vector(end))
    return x


def dilate_and_pad(x: tf.Tensor, fill: tf.Tensor, dilations, padding) -> tf.Tensor:
    """`x` with `dilation - 1` copies of `fill` between neighbours, then padded with `fill`
    by `padding` ([[low, high], ...], negative crops); ints or int32 scalars throughout."""
    rank = x.shape.rank
    return _padded(x, fill, _Window(dims=[1] * rank, strides=[1] * rank,
                                    base_dilations=list(dilations),
                                    window_dilations=[1] * rank, padding=list(padding)))


def _spans(padded: tf.Tensor, window: _Window) -> list:
    """Per dimension, how far one window position's strided slice reaches."""
    spans = []
    for size, w, dil in zip(dim_sizes(padded), window.dims, window.window_dilations):
        spans.append(_max0(size - (w - 1) * dil))
    return spans


class _View:
    """The windowed view of a padded tensor: `at(offsets)` is every window's element at one
    window position (offsets ints or int32 scalars).

    TF's StridedSlice with strides > 1 is slow on CPU (~30x a plain slice for a 3x3/2 pool),
    so a strided dimension of length L is padded to a multiple of its stride s and split as
    [L / s, s]: element o + i*s is then [o // s + i, o % s], a unit-stride slice.
    """

    def __init__(self, padded: tf.Tensor, window: _Window):
        self.window = window
        self.spans = _spans(padded, window)
        strides = window.strides
        self.split = all(_is_int(st) for st in strides) and any(st > 1 for st in strides)
        self.counts = [span if _is_int(st) and st == 1 else (span + st - 1) // st
                       for span, st in zip(self.spans, strides)]
        self.tensor = padded
        if self.split:
            sizes = dim_sizes(padded)
            extra = [(st - size % st) % st for size, st in zip(sizes, strides)]
            if any(_maybe_nonzero(e) for e in extra):
                rows = [[0, e] for e in extra]
                self.tensor = tf.pad(padded, rows if all(_is_int(e) for e in extra)
                                     else tf.stack([_vector(row) for row in rows]))
            shape = []
            for size, e, st in zip(sizes, extra, strides):
                shape += [(size + e) // st, st] if st > 1 else [size]
            self.tensor = tf.reshape(self.tensor, _vector(shape))

    def at(self, offsets, shape=None) -> tf.Tensor:
        window = self.window
        starts = [o * dil for o, dil in zip(offsets, window.window_dilations)]
        if not self.split:
            end = [b + span for b, span in zip(starts, self.spans)]
            view = tf.strided_slice(self.tensor, _vector(starts), _vector(end),
                                    _vector(window.strides))
        else:
            begin, size = [], []
            for start, count, span, st in zip(starts, self.counts, self.spans, window.strides):
                if st > 1:
                    begin += [start // st, start % st]
                    size += [count, 1]
                else:
                    begin.append(start)
                    size.append(span)
            view = tf.reshape(tf.slice(self.tensor, _vector(begin), _vector(size)),
                              _vector(self.counts))
        if shape is not None:
            view.set_shape(shape)
        return view


def _offsets(k, window: _Window) -> list:
    """Window position number `k` (row-major) as per-dimension offsets."""
    offsets, rest = [], k
    for w in reversed(window.dims):
        offsets.append(rest % w)
        rest = rest // w
    return offsets[::-1]


# ------------------------------------------------------------------------ reduce_window

def check_reduce_window(op: Op) -> str | None:
    why = _body_reason(op.regions[0])
    if why:
        return f"reduce_window: {why}"
    return None


def reduce_window(ctx, op: Op, *inputs):
    count = len(inputs) // 2
    window = _Window.of(op, inputs[0].shape.rank)
    return _reduce_window(ctx, op.regions[0], list(inputs[:count]), list(inputs[count:]),
                          window)


def dynamic_reduce_window(ctx, op: Op, *inputs):
    """JAX's custom call `stablehlo.dynamic_reduce_window` (reduce_window with a symbolic
    size): operands, inits, then window dimensions, strides, base and window dilations and
    padding as int tensors (read statically where constant); the body is a called function."""
    count = (len(inputs) - 5) // 2
    dims, strides, base, dilations = (static_or_unstacked(t)
                                      for t in inputs[2 * count:2 * count + 4])
    padding = [static_or_unstacked(row) for row in tf.unstack(inputs[-1])]
    window = _Window(dims=dims, strides=strides, base_dilations=base,
                     window_dilations=dilations, padding=padding)
    region = ctx.program.functions[op.attr("called_computations")[0]].body
    why = _body_reason(region)
    if why:
        raise unsupported(op, f"reduce_window: {why}")
    return _reduce_window(ctx, region, list(inputs[:count]), list(inputs[count:2 * count]),
                          window)


def static_or_unstacked(t: tf.Tensor) -> list:
    value = tf.get_static_value(t)
    if value is not None:
        return [int(v) for v in np.asarray(value).reshape(-1)]
    return tf.unstack(tf.cast(t, tf.int32))


def _reduce_window(ctx, region: Region, xs, inits, window: _Window):
    rank = xs[0].shape.rank
    count = len(xs)
    body_ops = _broadened(region, rank)
    if count == 1 and window.is_static:
        cumulative = _cumulative(ctx, region, xs[0], inits[0], window, body_ops)
        if cumulative is not None:
            return cumulative
        pooled = _max_pool(ctx, region, xs[0], inits[0], window, body_ops)
        if pooled is not None:
            return pooled
    padded = [_padded(x, init, window) for x, init in zip(xs, inits)]
    views = [_View(p, window) for p in padded]
    # XLA's CPU backend reduces only the operand's own elements (padding and base-dilation
    # holes are skipped, so the init counts once): where that differs from reducing the init
    # there too (a non-identity init), positions outside the operand leave the fold unchanged.
    holes = any(not _is_int(v) or v > 0 for row in window.padding for v in row) or \
        any(not _is_int(b) or b > 1 for b in window.base_dilations)
    valid = None
    if holes and not (count == 1 and _is_identity(_single_op(region), inits[0])):
        valid = _View(_padded(tf.ones(tf.shape(xs[0]), tf.bool), tf.constant(False), window),
                      window)

    def fold(accs, offsets, shape=None):
        elements = [view.at(offsets, shape) for view in views]
        folded = _run_body(ctx, region, body_ops, list(accs) + elements)
        if valid is None:
            return folded
        inside = valid.at(offsets, shape)
        return [tf.where(inside, new, old) for new, old in zip(folded, accs)]

    first = views[0].at([0] * rank)
    accs = [tf.fill(tf.shape(first), init) for init in inits]
    accs = fold(accs, [0] * rank)
    positions = window.positions
    if _is_int(positions) and positions <= _UNROLLED:
        for offsets in list(itertools.product(*[range(w) for w in window.dims]))[1:]:
            accs = fold(accs, list(offsets))
        return accs
    shapes = [a.shape for a in accs]

    def body(k, *accs):
        out = fold(accs, _offsets(k, window), shapes[0])
        for o, s in zip(out, shapes):
            o.set_shape(s)
        return (k + 1, *out)

    results = tf.while_loop(lambda k, *_: k < positions, body,
                            (tf.constant(1), *accs), parallel_iterations=1)
    return list(results[1:])


def _is_identity(name: str | None, init: tf.Tensor) -> bool:
    """Whether `init` is statically the identity of the single-op body `name`, so that
    reducing it over padding changes nothing."""
    value = tf.get_static_value(init)
    if value is None or name is None:
        return False
    value = np.asarray(value)
    dtype = init.dtype
    if name in ("stablehlo.add", "stablehlo.or"):
        return not value.any()  # 0.0 and -0.0 alike: the fold starts from init either way
    if name == "stablehlo.multiply":
        return bool(value == 1)
    if name == "stablehlo.and":
        return bool(value) if dtype == tf.bool else bool(np.all(~value == 0))
    if name in ("stablehlo.maximum", "stablehlo.minimum"):
        if dtype == tf.bool:
            return bool(value) == (name == "stablehlo.minimum")
        if dtype.is_floating:
            return bool(value == (-np.inf if name == "stablehlo.maximum" else np.inf))
        if dtype.is_integer:
            return int(value) == (dtype.min if name == "stablehlo.maximum" else dtype.max)
    return False


def _max_pool(ctx, region, x, init, window: _Window, body_ops):
    """A float max over 2-D windows of NHWC or NCHW as TF's MaxPool (several times faster
    than the fold), or None. Exact: the padding holds the init, max is idempotent so
    `max(init, pool)` is XLA's fold for any init, and NaN and all -inf windows, which MaxPool
    gets wrong, are found by pooling flags."""
    if _single_op(region) != "stablehlo.maximum" or x.dtype not in ds.FLOATS \
            or x.shape.rank != 4 or any(d != 1 for d in window.base_dilations
                                        + window.window_dilations):
        return None
    spatial = [d for d in range(4) if window.dims[d] != 1 or window.strides[d] != 1
               or window.padding[d] != [0, 0]]
    if set(spatial) <= {1, 2}:
        order = None
    elif set(spatial) <= {2, 3}:
        order = [0, 2, 3, 1]
    else:
        return None
    for d in spatial:  # MaxPool refuses windows larger than the input: fold those
        size = x.shape[d]
        if size is None or size + sum(window.padding[d]) < window.dims[d]:
            return None
    if order:
        x = tf.transpose(x, order)
        window = _Window(*[[getattr(window, f)[d] for d in order] for f in
                           ("dims", "strides", "base_dilations", "window_dilations",
                            "padding")])
    padded = _padded(x, init, window)
    pooled = tf.raw_ops.MaxPool(input=padded, ksize=window.dims, strides=window.strides,
                                padding="VALID")
    # MaxPool starts from the lowest finite value and may skip NaN: a pooled flag per window
    # says 2 = holds a NaN, 1 = holds a value above -inf, 0 = only -inf.
    flags = tf.where(tf.math.is_nan(padded), tf.constant(2, x.dtype),
                     tf.cast(padded > tf.constant(-np.inf, x.dtype), x.dtype))
    flags = tf.raw_ops.MaxPool(input=flags, ksize=window.dims, strides=window.strides,
                               padding="VALID")
    special = tf.where(flags > 1, tf.constant(np.nan, x.dtype), tf.constant(-np.inf, x.dtype))
    pooled = tf.where(tf.equal(flags, 1), pooled, special)
    if not _is_identity("stablehlo.maximum", init):
        pooled = ctx.emit(body_ops[0], [tf.fill(tf.shape(pooled), init), pooled])[0]
    return [tf.transpose(pooled, [0, 3, 1, 2]) if order else pooled]


def _cumulative(ctx, region, x, init, window: _Window, body_ops):
    """Prefix (or suffix) reductions along one axis without the quadratic fold, or None."""
    name = _single_op(region)
    if name is None or any(s != 1 for s in window.strides) \
            or any(d != 1 for d in window.base_dilations + window.window_dilations):
        return None
    axes = [a for a, w in enumerate(window.dims) if w != 1]
    if len(axes) != 1 or any(window.padding[a] != [0, 0] for a in range(len(window.dims))
                             if a != axes[0]):
        return None
    axis = axes[0]
    n = x.shape[axis]
    if n is None or window.dims[axis] != n or n < 2:
        return None
    reverse = {(n - 1, 0): False, (0, n - 1): True}.get(tuple(window.padding[axis]))
    if reverse is None:
        return None
    body_op = body_ops[0]
    idempotent = name in _IDEMPOTENT or (x.dtype == tf.bool and
                                         name in ("stablehlo.add", "stablehlo.multiply"))
    if idempotent:
        scanned = _doubling(ctx, body_op, x, axis, n, reverse)
    elif name in ("stablehlo.add", "stablehlo.multiply") and x.dtype != tf.bool \
            and x.dtype not in (tf.float16, tf.bfloat16):
        # (f16/bf16 fold instead: XLA's CPU backend rounds after every step, as the fold's
        # elementwise ops do, and TF's narrow-float scans do not quite.)
        scan = tf.math.cumsum if name == "stablehlo.add" else tf.math.cumprod
        if x.dtype in ds.UNSIGNED:
            scanned = ds.via_signed(lambda v: scan(v, axis=axis, reverse=reverse), x.dtype, x)
        else:
            scanned = scan(x, axis=axis, reverse=reverse)
    else:
        return None
    # XLA starts every window from init and skips the padding: init (+) prefix.
    return ctx.emit(body_op, [tf.fill(tf.shape(scanned), init), scanned])


def _doubling(ctx, body_op, x, axis, n, reverse):
    """Hillis-Steele scan: after step k each element holds the reduction of 2^k neighbours."""
    shift = 1
    while shift < n:
        head = [slice(None)] * x.shape.rank
        tail = [slice(None)] * x.shape.rank
        if not reverse:
            head[axis], tail[axis] = slice(0, shift), slice(shift, None)
            earlier = [slice(None)] * x.shape.rank
            earlier[axis] = slice(0, n - shift)
            combined = ctx.emit(body_op, [x[tuple(tail)], x[tuple(earlier)]])[0]
            x = tf.concat([x[tuple(head)], combined], axis=axis)
        else:
            head[axis], tail[axis] = slice(0, n - shift), slice(n - shift, None)
            later = [slice(None)] * x.shape.rank
            later[axis] = slice(shift, None)
            combined = ctx.emit(body_op, [x[tuple(head)], x[tuple(later)]])[0]
            x = tf.concat([combined, x[tuple(tail)]], axis=axis)
        shift *= 2
    return x


# ------------------------------------------------------------------------ select_and_scatter

def check_select_and_scatter(op: Op) -> str | None:
    select, scatter = op.regions
    why = _body_reason(select)
    if why:
        return f"select_and_scatter's select: {why}"
    if any(p < 0 for row in (op.attr("padding") if op.attr("padding") is not None else [])
           for p in row):
        return "select_and_scatter with negative padding"
    why = _body_reason(scatter)
    if why:
        return f"select_and_scatter's scatter: {why}"
    return None


def select_and_scatter(ctx, op: Op, operand, source, init):
    select_region, scatter_region = op.regions
    rank = operand.shape.rank
    window = _Window.of(op, rank)
    window = dataclasses.replace(window, base_dilations=[1] * rank,
                                 window_dilations=[1] * rank)
    select_ops = _broadened(select_region, rank)
    scatter_ops = _broadened(scatter_region, rank)
    if 0 in op.operand_types[1].shape or window.positions == 0:
        return tf.fill(tf.shape(operand), init)  # no window: nothing is scattered
    padded = _padded(operand, tf.zeros([], operand.dtype), window)
    valid = _padded(tf.ones(tf.shape(operand), tf.bool), tf.constant(False), window)
    view, valid = _View(padded, window), _View(valid, window)
    positions = list(itertools.product(*[range(w) for w in window.dims]))
    chosen = view.at(positions[0])
    chosen_k = tf.zeros(tf.shape(chosen), tf.int32)
    found = valid.at(positions[0])
    shape = chosen.shape

    def step(k, offsets, chosen, chosen_k, found):
        candidate = view.at(offsets, shape)
        candidate_valid = valid.at(offsets, shape)
        keep = _run_body(ctx, select_region, select_ops, [chosen, candidate])[0]
        take = tf.logical_and(candidate_valid,
                              tf.logical_or(tf.logical_not(found), tf.logical_not(keep)))
        chosen = tf.where(take, candidate, chosen)
        chosen_k = tf.where(take, tf.fill(tf.shape(chosen_k), tf.cast(k, tf.int32)), chosen_k)
        return chosen, chosen_k, tf.logical_or(found, candidate_valid)

    if window.positions <= _UNROLLED:
        for k, offsets in enumerate(positions[1:], start=1):
            chosen, chosen_k, found = step(k, list(offsets), chosen, chosen_k, found)
    else:
        def body(k, chosen, chosen_k, found):
            return (k + 1, *step(k, _offsets(k, window), chosen, chosen_k, found))
        _, chosen, chosen_k, found = tf.while_loop(
            lambda k, *_: k < window.positions, body, (tf.constant(1), chosen, chosen_k, found),
            parallel_iterations=1)
    return _scatter_selected(ctx, scatter_region, scatter_ops, operand, padded, source, init,
                             chosen_k, found, window)


def _scatter_selected(ctx, scatter_region, scatter_ops, operand, padded, source, init,
                      chosen_k, found, window: _Window):
    """The result: init everywhere, then each window's source value combined by the scatter
    body into its chosen position, in XLA's order (windows row-major). For one position the
    windows covering it come in row-major order exactly when their chosen offsets come in
    reverse row-major order, so offsets are visited last to first; each offset's values land
    at `offset + window * stride`, a placement with no collisions."""
    windows_shape = dim_sizes(chosen_k)
    padded_shape = dim_sizes(padded)
    zero = tf.zeros([], source.dtype)
    # The result lives split as the windowed view reads it (a strided dimension of length L
    # as [L / s, s], L padded to a multiple of s): one offset's values are then a plain pad
    # of the windows' values, [o // s + i, o % s] for window i.
    strides = window.strides
    extra = [(st - size % st) % st for size, st in zip(padded_shape, strides)]
    split_shape = []
    for size, e, st in zip(padded_shape, extra, strides):
        split_shape += [(size + e) // st, st] if st > 1 else [size]
    result = tf.fill(_vector(split_shape), init)

    def place(offsets, values, fill):
        shape, rows = [], []
        for o, count, size, e, st in zip(offsets, windows_shape, padded_shape, extra, strides):
            if st > 1:
                q, r = o // st, o % st
                shape += [count, 1]
                rows += [[q, (size + e) // st - q - count], [r, st - 1 - r]]
            else:
                shape.append(count)
                rows.append([o, size - o - count])
        expanded = tf.reshape(values, _vector(shape))
        rows = rows if all(_is_int(v) for row in rows for v in row) else \
            tf.stack([_vector(row) for row in rows])
        return tf.pad(expanded, rows, constant_values=fill)

    def step(k, offsets, result):
        here = tf.logical_and(found, tf.equal(chosen_k, tf.cast(k, tf.int32)))
        values = place(offsets, tf.where(here, source, tf.fill(tf.shape(source), zero)), zero)
        mask = place(offsets, here, tf.constant(False))
        combined = _run_body(ctx, scatter_region, scatter_ops, [result, values])[0]
        combined.set_shape(result.shape)
        return tf.where(mask, combined, result)

    positions = window.positions
    if positions <= _UNROLLED:
        for k, offsets in reversed(list(enumerate(
                itertools.product(*[range(w) for w in window.dims])))):
            result = step(k, list(offsets), result)
    else:
        def body(i, result):
            k = positions - 1 - i
            return i + 1, step(k, _offsets(k, window), result)
        _, result = tf.while_loop(lambda i, _: i < positions, body, (tf.constant(0), result),
                                  parallel_iterations=1)
    result = tf.reshape(result, _vector([size + e for size, e in zip(padded_shape, extra)]))
    lows = [lo for lo, _ in window.padding]
    return tf.strided_slice(result, lows, _vector([lo + s for lo, s in
                                                   zip(lows, dim_sizes(operand))]))
