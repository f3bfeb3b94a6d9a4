"""`reduce_window` as TF ops (pooling, cumulative sums/products/max/min/logsumexp, JAX's
select_and_gather_add), and the windowed view that it and `select_and_scatter`
(select_and_scatter.py) work on.

The windowed view is built from strided slices: the operand is base-dilated and padded
(negative padding crops), and window position (i, j, ...) reads
`padded[i*dil::stride, j*dil::stride, ...]`. Strided positions are unit-stride slices of the
operand reshaped [L / s, s] (TF's StridedSlice with strides > 1 is slow on CPU).

reduce_window folds the positions as XLA's CPU backend does, `acc = init; acc = body(acc,
x_p)` for p in XLA's loop order, and like it skips positions in the padding or in
base-dilation holes (the init counts once per window: with a non-identity init this differs
from reducing init-valued padding, and JAX on CPU gives the former). XLA's loop order is
row-major except that its loop peeling (`PeelLoops`) may move the last offset of one window
dimension to the end (`xla_fold_order`). The order decides which of tied elements a select
body keeps (a max pool's tangent); where XLA's order depends on a symbolic size, such a body
is refused. Float sums agree to rounding only, as reduce's do: XLA marks their additions
reassociable (LLVM's `reassoc`). The body's own elementwise ops run on
whole tensors, so NaN, integer, signed-zero and total-order semantics are the elementwise
lowering's. Up to `UNROLLED` positions are unrolled; more run in a `tf.while_loop`.
Float max pools over two dimensions of a rank-4 operand run as TF's MaxPool, NaN and +0.0
restored from pooled flags; cumulative windows run as scans (windows_cumulative.py).
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import tensorflow as tf

from tf_ops import nan_guards
from tf_ops.plain import dtype_support as ds
from tf_ops.plain import op_rows, reductions, windows_cumulative
from tf_ops.plain.errors import unsupported
from tf_ops.plain.program import Op, Region, TensorType
from tf_ops.plain.windowed_view import (
    View,
    Window,
    is_int,
    static_or_unstacked,
    window_offsets,
    window_padded,
)

# More window positions than this run in a tf.while_loop instead of one slice each.
UNROLLED = 64

# ------------------------------------------------------------------------ bodies

def body_reason(region: Region) -> str | None:
    """Why a window (or select/scatter) body cannot run on whole tensors, or None: it may hold
    only elementwise ops (their op_table rows say so), which on whole tensors compute every
    window at once, and only values of its own."""
    defined = set(region.args)
    for body_op in region.ops:
        if not op_rows.elementwise(body_op.name):
            return f"its body holds {body_op.name}, which is not elementwise"
        if any(v not in defined for v in body_op.operands):
            return "its body uses a value from outside the body"
        defined.update(body_op.results)
    return None


def broadened(region: Region, rank: int) -> list[Op]:
    """The body's ops with results of unknown size at `rank`: the interpreter then checks
    only the rank of what they build from whole tensors."""
    ops = []
    for body_op in region.ops:
        types = tuple(TensorType((None,) * (0 if body_op.name == "stablehlo.constant" else rank),
                                 t.element, t.dtype) for t in body_op.result_types)
        ops.append(dataclasses.replace(body_op, result_types=types))
    return ops


def run_body(ctx, region: Region, ops: list[Op], values: list[tf.Tensor]) -> list[tf.Tensor]:
    env = dict(zip(region.args, values))
    for body_op in ops:
        outputs = ctx.emit(body_op, [env[v] for v in body_op.operands])
        env.update(zip(body_op.results, outputs))
    return [env[v] for v in region.returns]


def single_op(region: Region) -> str | None:
    """The op name of a body `return op(arg0, arg1)` (either order), else None."""
    if len(region.ops) != 1 or len(region.args) != 2:
        return None
    body_op = region.ops[0]
    if sorted(body_op.operands) != sorted(region.args) or region.returns != body_op.results:
        return None
    return body_op.name


# ------------------------------------------------------------------------ reduce_window

def check_reduce_window(op: Op) -> str | None:
    why = body_reason(op.regions[0])
    if why:
        return f"reduce_window: {why}"
    operand = op.operand_types[0]
    if order_sensitive(op.regions[0]) and \
            _order_unknown(Window.of(op, operand.rank), list(operand.shape)):
        return _ORDER_UNKNOWN
    return None


_ORDER_UNKNOWN = ("reduce_window: its body's result depends on the order of the window's "
                  "elements, and XLA's order here depends on a symbolic size of a padded "
                  "windowed dimension (give that dimension a static size)")


def _order_unknown(window: Window, shape: list) -> bool:
    """Whether XLA's fold order (`xla_fold_order`) depends on a size unknown here: that of a
    windowed dimension with padding or base dilation (without, no offset is ever outside)."""
    for d, (size, w) in enumerate(zip(shape, window.dims)):
        if is_int(w) and w == 1:
            continue
        if not is_int(w) or not window.is_static:
            return True
        if size is None and (any(window.padding[d]) or window.base_dilations[d] != 1):
            return True
    return False


def order_sensitive(region: Region) -> bool:
    """Whether folding the window in another order could pick another element: for bodies
    other than one associative op (e.g. JAX's select bodies of max-pool tangents, which keep
    the first of tied elements). Float sums and products in another order differ by rounding
    only, as reduce's sums do (reductions.py), and fold in row-major order where XLA's order
    is unknown."""
    return single_op(region) is None


def reduce_window(ctx, op: Op, *inputs):
    count = len(inputs) // 2
    window = Window.of(op, inputs[0].shape.rank)
    return _reduce_window(ctx, op.regions[0], list(inputs[:count]), list(inputs[count:]),
                          window, [ctx.splat(v) for v in op.operands[count:]])


def dynamic_reduce_window(ctx, op: Op, *inputs):
    """JAX's custom call `stablehlo.dynamic_reduce_window` (reduce_window with a symbolic
    size): operands, inits, then window dimensions, strides, base and window dilations and
    padding as int tensors (read statically where constant); the body is a called function."""
    count = (len(inputs) - 5) // 2
    dims, strides, base, dilations = (static_or_unstacked(t)
                                      for t in inputs[2 * count:2 * count + 4])
    padding = [static_or_unstacked(row) for row in tf.unstack(inputs[-1])]
    window = Window(dims=dims, strides=strides, base_dilations=base,
                     window_dilations=dilations, padding=padding)
    region = op.regions[0]  # the called function's body (program.read_program attaches it)
    if order_sensitive(region) and \
            _order_unknown(window, inputs[0].shape.as_list()):
        raise unsupported(op, _ORDER_UNKNOWN)
    return _reduce_window(ctx, region, list(inputs[:count]), list(inputs[count:2 * count]),
                          window, [ctx.splat(v) for v in op.operands[count:2 * count]])


def check_dynamic_reduce_window(op: Op) -> str | None:
    if not op.regions:
        return "dynamic_reduce_window without a body to reduce with"
    why = body_reason(op.regions[0])
    return f"reduce_window: {why}" if why else None


def _reduce_window(ctx, region: Region, xs, inits, window: Window, init_consts):
    rank = xs[0].shape.rank
    count = len(xs)
    body_ops = broadened(region, rank)
    name = single_op(region)
    if count == 1 and window.is_static:
        cumulative = windows_cumulative.cumulative(ctx, name, body_ops[0], xs[0], inits[0],
                                                   init_consts[0], window)
        if cumulative is not None:
            return cumulative
        pooled = _max_pool(xs[0], inits[0], init_consts[0], window, name)
        if pooled is not None:
            return pooled
    padded = [window_padded(x, init, window) for x, init in zip(xs, inits)]
    views = [View(p, window) for p in padded]
    # XLA's CPU backend reduces only the operand's own elements (padding and base-dilation
    # holes are skipped, so the init counts once): where that differs from reducing the init
    # there too (a non-identity init), positions outside the operand leave the fold unchanged.
    holes = any(not is_int(v) or v > 0 for row in window.padding for v in row) or \
        any(not is_int(b) or b > 1 for b in window.base_dilations)
    valid = None
    if holes and not (count == 1 and _is_identity(name, inits[0], init_consts[0])):
        valid = View(window_padded(tf.ones(tf.shape(xs[0]), tf.bool), tf.constant(False),
                                   window), window)

    def fold(accs, offsets, shape=None, first=False):
        elements = [view.at(offsets, shape) for view in views]
        if first and name is not None:
            # body(init, x) without a `fill(init) + x` that TF's optimizer would simplify
            folded = [reductions.combine_init(name, inits[0], init_consts[0], elements[0])]
        else:
            folded = run_body(ctx, region, body_ops, list(accs) + elements)
        if valid is None:
            return folded
        inside = valid.at(offsets, shape)
        return [tf.where(inside, new, old) for new, old in zip(folded, accs)]

    order = xla_fold_order(window, xs[0].shape.as_list())
    first = views[0].at([0] * rank)
    accs = [tf.fill(tf.shape(first), init) for init in inits]
    accs = fold(accs, list(order[0]) if order else [0] * rank, first=True)
    positions = window.positions
    if is_int(positions) and positions <= UNROLLED:
        for offsets in order[1:] if order else \
                list(itertools.product(*[range(w) for w in window.dims]))[1:]:
            accs = fold(accs, list(offsets))
        return accs
    shapes = [a.shape for a in accs]
    table = tf.constant(np.array(order, np.int32)) if order else None

    def body(k, *accs):
        offsets = tf.unstack(table[k]) if order else window_offsets(k, window)
        out = fold(accs, offsets, shapes[0])
        for o, s in zip(out, shapes):
            o.set_shape(s)
        return (k + 1, *out)

    results = tf.while_loop(lambda k, *_: k < positions, body,
                            (tf.constant(1), *accs), parallel_iterations=1)
    return list(results[1:])


def xla_fold_order(window: Window, shape: list) -> list | None:
    """The window positions (offset tuples) in the order XLA's CPU loop visits them, or None
    for row-major (also when sizes are symbolic: `check_reduce_window` refuses the cases
    where that could matter).

    XLA's `PeelLoops` goes over the window dimensions from the last (while the later ones
    hold under 64 positions) and peels the first one it can: a dimension whose offsets are
    out of the operand for some output, all but the last offset always in it (or a window of
    2), runs its last offset in a second loop after the rest (measured on jax 0.10.2; a 3x3/2
    max pool with SAME padding on an even size visits columns 0-1 of every row, then column
    2).
    """
    if not window.is_static:
        return None

    def out_of_operand(i, last):
        stride, dilation, base = (window.strides[i], window.window_dilations[i],
                                  window.base_dilations[i])
        span = (shape[i] - 1) * base + 1 + sum(window.padding[i])
        outs = max(0, (span - (window.dims[i] - 1) * dilation - 1) // stride + 1)
        for d in range(outs):
            for k in range(last + 1):
                p = d * stride + k * dilation - window.padding[i][0]
                if not (0 <= p <= (shape[i] - 1) * base and p % base == 0):
                    return True
        return False

    later = 1
    for i in reversed(range(len(shape))):
        if later >= 64:
            return None
        w = window.dims[i]
        later *= w
        if w == 1:
            continue
        if shape[i] is None:
            if any(window.padding[i]) or window.base_dilations[i] != 1:
                return None  # refused where it matters (`_order_unknown`)
            continue  # no offset is ever out of the operand
        if not out_of_operand(i, w - 1):
            continue
        if w > 2 and out_of_operand(i, w - 2):
            continue
        ranges = [range(x) for x in window.dims]
        main = list(itertools.product(*(ranges[:i] + [range(w - 1)] + ranges[i + 1:])))
        tail = list(itertools.product(*(ranges[:i] + [range(w - 1, w)] + ranges[i + 1:])))
        return main + tail
    return None


def _is_identity(name: str | None, init: tf.Tensor, init_const) -> bool:
    """Whether `init` (constant scalar `init_const`, if known) is statically the identity of
    the single-op body `name`, so that reducing it over padding changes nothing."""
    value = init_const if init_const is not None else tf.get_static_value(init)
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


def _max_pool(x, init, init_const, window: Window, name):
    """A float max over 2-D windows of NHWC or NCHW as TF's MaxPool, the op a TF engineer
    writes (TFLite, TF.js and Core ML take it as their pooling op), or None.

    SAME or VALID padding of TF's where the window's padding is that (MaxPool skips padded
    positions, as XLA's fold does with -inf padding), else the padding explicit with the init.
    `max(init, pool)` is XLA's fold for any init (max is idempotent). MaxPool skips NaN, where
    JAX's max propagates it: `maximum(pool, avg_pool(minimum(x, -inf)))` restores it (the
    average is NaN where the window holds a NaN, else -inf; TF's Maximum propagates NaN;
    `_nan_flags` takes a cheaper form over a ReLU's output), a
    guard TFLite's and TF.js's writers drop (tf_ops.nan_guards). No guard where `jax.jit`
    itself skips NaN (`_jaxlib_skips_nan`). What the contract tolerates (docs/exactness.md):
    a window of only -inf (or, unguarded, of NaN and -inf) gives MaxPool's floor, the lowest
    finite float, and where -0.0 and +0.0 tie the kernel returns either."""
    if name != "stablehlo.maximum" or x.dtype not in ds.FLOATS \
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
        if max(window.padding[d]) >= window.dims[d]:
            return None  # windows wholly in the padding: init there, not MaxPool's floor
    skips_nan = _jaxlib_skips_nan(x, window, init_const)
    if order:
        x = tf.transpose(x, order)
        window = Window(*[[getattr(window, f)[d] for d in order] for f in
                          ("dims", "strides", "base_dilations", "window_dilations",
                           "padding")])
    padding = _tf_pool_padding(x, window, init_const)
    if padding is None:
        x = window_padded(x, init, window)
        padding = "VALID"
    pool_args = dict(ksize=window.dims, strides=window.strides, padding=padding)
    pooled = tf.raw_ops.MaxPool(input=x, **pool_args)
    if not skips_nan:
        pooled = nan_guards.guarded(pooled, tf.maximum, lambda: _nan_flags(x, pool_args))
    pooled = reductions.combine_init(name, init, init_const, pooled)
    return [tf.transpose(pooled, [0, 3, 1, 2]) if order else pooled]


# jaxlib 0.10's CPU backend pools float32/float64 windows that do not overlap, over operands of
# this many elements or more, with YNNPACK's kernels, which skip NaN as TF's MaxPool does
# (tests/tf_ops/plain/test_reductions.py pins it, so an upgrade that moves it fails there).
JAXLIB_NAN_SKIPPING_POOL_ELEMENTS = 4096


def _jaxlib_skips_nan(x, window: Window, init_const) -> bool:
    """Whether `jax.jit` on CPU skips NaN in this max pool at every size its symbolic
    dimensions (each at least 1) can take: then the plain graph does not restore it, and
    equals `jax.jit` (the benchmark's CNN pools are such: docs/exactness.md)."""
    static = int(np.prod([d for d in x.shape.as_list() if d is not None]))
    return (x.dtype in (tf.float32, tf.float64) and list(window.strides) == list(window.dims)
            and init_const is not None and bool(init_const == -np.inf)
            and static >= JAXLIB_NAN_SKIPPING_POOL_ELEMENTS)


def _nan_flags(x, pool_args: dict):
    """NaN where a window of `x` holds a NaN, else -inf: an average of `x` made -inf first,
    since a window holding +inf and -inf averages to NaN too. When no element of `x` can be
    -inf (a ReLU's output, as in most CNNs), the average itself is NaN only where a NaN is,
    and the -inf is taken at the pooled size: one pass over `x` fewer (the most costly part
    of the guard in TF; benchmarks/results/plain_vs_handwritten.md)."""
    minus_inf = tf.constant(-np.inf, x.dtype)
    if nan_guards.never_negative_infinity(x):
        return tf.minimum(tf.raw_ops.AvgPool(value=x, **pool_args), minus_inf)
    return tf.raw_ops.AvgPool(value=tf.minimum(x, minus_inf), **pool_args)


def _tf_pool_padding(x, window: Window, init_const) -> str | None:
    """"VALID" or "SAME" when TF's padding of that name is the window's (static sizes; a
    padded position must be one max ignores: an init of -inf), else None."""
    pads = [list(p) for p in window.padding]
    if all(p == [0, 0] for p in pads):
        return "VALID"
    if init_const is None or not bool(init_const == -np.inf):
        return None
    for size, extent, stride, pad in zip(x.shape.as_list(), window.dims, window.strides, pads):
        if size is None:
            return None
        out = -(-size // stride)
        total = max((out - 1) * stride + extent - size, 0)
        if pad != [total // 2, total - total // 2]:
            return None
    return "SAME"
