"""Cumulative reduce_windows (JAX's cumsum/cumprod/cummax/cummin/... on CPU: one axis whose
window is its whole length, padded [n-1, 0] or [0, n-1]) without the quadratic fold.

- max/min/and/or (and bool add/multiply) are exact in any order: log-step doubling.
- Integer sums and products wrap alike in any order: TF's cumsum / cumprod.
- Float and complex sums and products round, so the order is XLA's. Its CPU compiler rewrites
  a scan longer than 16 as a tree (`ReduceWindowRewriter`, base length 16): pad the axis with
  the init value to a multiple of 16, view it as rows of 16, scan each row, scan the rows' last
  (reverse: first) elements exclusively (itself a tree past 16 rows), and add that to each
  row. Every scan there is a reduce_window whose windows XLA folds from the init in increasing
  position order: a prefix is TF's sequential cumsum (measured: TF's CPU scans, f16/bf16
  included, round after every step as XLA does); a suffix is folded from its first element,
  which no reverse cumsum does, so reverse scans fold each row's [16, 16] masked copy.
  Results equal jax.jit's bit for bit (tests/tf_ops/plain/test_edge_values.py).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain import elementwise as ew
from tf_ops.plain import op_rows, reductions

# XLA's CPU compiler runs ReduceWindowRewriter with this base length.
_BASE = 16


def cumulative(ctx, name, body_op, x, init, init_const, window):
    """Prefix (or suffix) reductions along one axis by the single-op body `name` (body_op),
    or None if `window` (a windows.Window) is not one. `init_const` is the init's constant
    scalar, if known."""
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
    if op_rows.idempotent(name) or (x.dtype == tf.bool and
                               name in ("stablehlo.add", "stablehlo.multiply")):
        scanned = _doubling(ctx, body_op, x, axis, n, reverse)
    elif name in ("stablehlo.add", "stablehlo.multiply") and x.dtype in ds.INTEGERS:
        scan = tf.math.cumsum if name == "stablehlo.add" else tf.math.cumprod
        scanned = ds.via_signed(lambda v: scan(v, axis=axis, reverse=reverse), x.dtype, x)
    elif name in ("stablehlo.add", "stablehlo.multiply"):
        if name == "stablehlo.multiply" and x.dtype in ds.COMPLEX:
            return None  # XLA's complex products are fused multiply-adds: the fold has them
        return [_xla_tree_scan(x, axis, reverse, name == "stablehlo.add", init, init_const)]
    else:
        return None
    # XLA starts every window from init: init (+) prefix.
    return [reductions.combine_init(name, init, init_const, scanned)]


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


# ------------------------------------------------------------------------ XLA's tree scan

def _xla_tree_scan(x, axis, reverse, is_add, init, init_const):
    rank = x.shape.rank
    order = list(range(rank))
    order[axis], order[-1] = order[-1], order[axis]
    moved = tf.transpose(x, order) if axis != rank - 1 else x
    init = _Init(tf.reshape(init, []), init_const)
    scanned = _scan(moved, reverse, is_add, init)
    return tf.transpose(scanned, order) if axis != rank - 1 else scanned


class _Init:
    """The scans' init: its scalar tensor and, if known, its constant value."""

    def __init__(self, tensor, value):
        self.tensor, self.value = tensor, value

    def fill(self, shape):
        return tf.fill(shape, self.tensor)


def _scan(x, reverse, is_add, init: _Init):
    """Inclusive scan along the last (static) axis, as XLA's rewritten reduce_windows."""
    n = x.shape[-1]
    if n <= _BASE:
        return _suffix_folds(x, is_add, init) if reverse else _prefix_folds(x, is_add, init)
    rank = x.shape.rank
    rows = -(-n // _BASE)
    static = x.shape[:-1].as_list()
    batch = static if None not in static else tf.shape(x)[:-1]

    def shape(*tail):
        return batch + list(tail) if isinstance(batch, list) else tf.concat([batch, tail], 0)

    def pad_last(t, low, high):  # with the init, as XLA pads
        return tf.pad(t, [[0, 0]] * (rank - 1) + [[low, high]], constant_values=init.tensor)

    tiles = tf.reshape(pad_last(x, 0, rows * _BASE - n), shape(rows, _BASE))
    tiles.set_shape(x.shape[:-1].concatenate([rows, _BASE]))
    if not reverse:
        scanned = _prefix_folds(tiles, is_add, init)
        carries = _scan(scanned[..., -1], False, is_add, init)   # inclusive over the rows
        carries = pad_last(carries[..., :-1], 1, 0)               # exclusive
    else:
        scanned = _suffix_folds(tiles, is_add, init)
        carries = _scan(scanned[..., 0], True, is_add, init)
        carries = pad_last(carries[..., 1:], 0, 1)
    combined = scanned + carries[..., None] if is_add else scanned * carries[..., None]
    return tf.reshape(combined, shape(rows * _BASE))[..., :n]


def _prefix_folds(x, is_add, init: _Init):
    """y[j] = fold(init, x[0], ..., x[j]) along the last axis, sequentially as XLA folds."""
    scan = tf.math.cumsum if is_add else tf.math.cumprod
    if init.value is not None and _is_identity(is_add, init.value):
        return scan(x, axis=-1)
    if init.value is not None and is_add and bool(init.value == 0) \
            and x.dtype.is_floating:
        return ew.plus_zero(scan(x, axis=-1))  # +0 + x0 = x0 except that -0.0 becomes +0.0
    first = init.fill(tf.concat([tf.shape(x)[:-1], [1]], 0))
    return scan(tf.concat([first, x], -1), axis=-1)[..., 1:]


def _suffix_folds(x, is_add, init):
    """y[j] = fold(init, x[j], ..., x[n-1]) folded from x[j] on, as XLA folds a reverse window:
    the prefix folds of a [n, n] copy whose row j holds the identity before position j."""
    n = x.shape[-1]
    if not is_add:
        identity = tf.constant(1, x.dtype)
    elif x.dtype.is_complex:
        identity = ds.scalar(complex(-0.0, -0.0), x.dtype)
    else:
        identity = ds.scalar(-0.0, x.dtype)
    keep = tf.constant(np.arange(n)[None, :] >= np.arange(n)[:, None])  # [j, k]: k >= j
    rows = tf.where(keep, x[..., None, :], identity)
    return _prefix_folds(rows, is_add, init)[..., -1]


def _is_identity(is_add: bool, value) -> bool:
    """-0.0 is the exact identity of float addition (x + -0.0 = x for every x), 1 of
    multiplication."""
    value = np.asarray(value)
    if is_add:
        return value.dtype.kind != "c" and bool(value == 0) and bool(np.signbit(value))
    return bool(value == 1)
