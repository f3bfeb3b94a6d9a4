"""The windowed view that reduce_window (windows.py), select_and_scatter
(select_and_scatter.py) and dilated convolutions (contractions.py) work on.

The operand is base-dilated and padded (negative padding crops), and window position
(i, j, ...) reads `padded[i*dil::stride, j*dil::stride, ...]`. Strided positions are
unit-stride slices of the operand reshaped [L / s, s] (TF's StridedSlice with strides > 1 is
slow on CPU). Sizes may be Python ints or int32 scalars computed at run time.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from tf_ops.plain.program import Op

# The most dimensions a view's tensors have (TFLite's kernels take at most 5).
MAX_RANK = 5


@dataclasses.dataclass(frozen=True)
class Window:
    """A window's geometry, one entry per operand dimension."""
    dims: list
    strides: list
    base_dilations: list
    window_dilations: list
    padding: list  # [[low, high], ...]

    @classmethod
    def of(cls, op: Op, rank: int) -> "Window":
        padding = op.attr("padding")
        return cls(dims=list(op.attr("window_dimensions")),
                   strides=list(op.attr("window_strides", None) or [1] * rank),
                   base_dilations=list(op.attr("base_dilations", None) or [1] * rank),
                   window_dilations=list(op.attr("window_dilations", None) or [1] * rank),
                   padding=[[int(lo), int(hi)] for lo, hi in padding] if padding is not None
                   else [[0, 0]] * rank)

    @property
    def positions(self) -> int | tf.Tensor:
        if all(is_int(d) for d in self.dims):
            return int(np.prod(self.dims, dtype=np.int64))
        return tf.reduce_prod(vector(self.dims))

    @property
    def is_static(self) -> bool:
        return all(is_int(v) for v in self.dims + self.strides + self.base_dilations
                   + self.window_dilations + [v for row in self.padding for v in row])


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer))


def max0(value):
    return max(int(value), 0) if is_int(value) else tf.maximum(value, 0)


def _maybe_nonzero(value) -> bool:
    return not is_int(value) or value != 0


def dim_sizes(x: tf.Tensor) -> list:
    """Static ints where known, run-time int32 scalars otherwise."""
    static = x.shape.as_list()
    if all(d is not None for d in static):
        return static
    dynamic = tf.shape(x, out_type=tf.int32)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def vector(values) -> list | tf.Tensor:
    if all(is_int(v) for v in values):
        return [int(v) for v in values]
    return tf.stack([tf.cast(v, tf.int32) for v in values])


def interleave(x: tf.Tensor, axis: int, factor, fill: tf.Tensor) -> tf.Tensor:
    """`factor - 1` copies of scalar `fill` between neighbours along `axis` (`factor` an int
    or an int32 scalar)."""
    sizes = dim_sizes(x)
    filler = tf.fill(vector(sizes[:axis + 1] + [factor - 1] + sizes[axis + 1:]), fill)
    joined = tf.concat([tf.expand_dims(x, axis + 1), filler], axis=axis + 1)
    joined = tf.reshape(joined, vector(sizes[:axis] + [sizes[axis] * factor]
                                        + sizes[axis + 1:]))
    keep = max0(sizes[axis] * factor - (factor - 1))
    begin = [0] * x.shape.rank
    end = sizes[:axis] + [keep] + sizes[axis + 1:]
    return _with_static_sizes(tf.strided_slice(joined, begin, vector(end)), end)


def _with_static_sizes(x: tf.Tensor, sizes) -> tf.Tensor:
    """`x` with the sizes known at conversion set: a slice to a computed end (one symbolic
    size makes it a tensor) loses them all, and a view reads them (an empty dimension next to
    a symbolic one was sliced at an offset past its end)."""
    x.set_shape([s if is_int(s) else None for s in sizes])
    return x


def window_padded(x: tf.Tensor, fill: tf.Tensor, window: Window) -> tf.Tensor:
    """`x` base-dilated and padded with `fill`, as the window sees it (sizes may be int32
    scalars computed at run time)."""
    for axis, factor in enumerate(window.base_dilations):
        if not is_int(factor) or factor > 1:
            x = interleave(x, axis, factor, fill)
    pads = [[max0(lo), max0(hi)] for lo, hi in window.padding]
    if any(_maybe_nonzero(v) for row in pads for v in row):
        rows = pads if all(is_int(v) for row in pads for v in row) else \
            tf.stack([vector(row) for row in pads])
        x = tf.pad(x, rows, constant_values=fill)
    crops = [(max0(-lo), max0(-hi)) for lo, hi in window.padding]
    if any(_maybe_nonzero(c) for pair in crops for c in pair):
        sizes = dim_sizes(x)
        end = [s - hi for s, (_, hi) in zip(sizes, crops)]
        end = [max(e, lo) if is_int(e) and is_int(lo) else tf.maximum(e, lo)
               for e, (lo, _) in zip(end, crops)]
        x = _with_static_sizes(
            tf.strided_slice(x, vector([lo for lo, _ in crops]), vector(end)),
            [e - lo if is_int(e) and is_int(lo) else None for e, (lo, _) in zip(end, crops)])
    return x


def dilate_and_pad(x: tf.Tensor, fill: tf.Tensor, dilations, padding) -> tf.Tensor:
    """`x` with `dilation - 1` copies of `fill` between neighbours, then padded with `fill`
    by `padding` ([[low, high], ...], negative crops); ints or int32 scalars throughout."""
    rank = x.shape.rank
    return window_padded(x, fill, Window(dims=[1] * rank, strides=[1] * rank,
                                    base_dilations=list(dilations),
                                    window_dilations=[1] * rank, padding=list(padding)))


def _spans(padded: tf.Tensor, window: Window) -> list:
    """Per dimension, how far one window position's strided slice reaches."""
    spans = []
    for size, w, dil in zip(dim_sizes(padded), window.dims, window.window_dilations):
        spans.append(max0(size - (w - 1) * dil))
    return spans


class View:
    """The windowed view of a padded tensor: `at(offsets)` is every window's element at one
    window position (offsets ints or int32 scalars).

    TF's StridedSlice with strides > 1 is slow on CPU (~30x a plain slice for a 3x3/2 pool),
    so a strided dimension of length L is padded to a multiple of its stride s and split as
    [L / s, s]: element o + i*s is then [o // s + i, o % s], a unit-stride slice (where the
    splits keep the view within `MAX_RANK` dimensions; otherwise strided slices).
    """

    def __init__(self, padded: tf.Tensor, window: Window):
        self.window = window
        self.spans = _spans(padded, window)
        strides = window.strides
        # The last dimension, taken whole by every position (NHWC's C), joins the split of
        # the one before it ([W / s, s * C]: a position's block of C is contiguous), so a
        # strided 2-D pool of NHWC is 5-D. Views stay within MAX_RANK dimensions (TFLite's
        # Slice and Reshape take no more); beyond, strided slices of the operand.
        rank = padded.shape.rank
        last = padded.shape[-1] if rank >= 2 else None
        self.merged = (rank >= 2 and last is not None
                       and all(is_int(v) for v in (strides[-2], strides[-1], window.dims[-1]))
                       and strides[-2] > 1 and strides[-1] == 1 and window.dims[-1] == 1)
        self.split = all(is_int(st) for st in strides) and 0 < sum(
            st > 1 for st in strides) - self.merged <= MAX_RANK - rank
        self.counts = [span if is_int(st) and st == 1 else (span + st - 1) // st
                       for span, st in zip(self.spans, strides)]
        self.tensor = padded
        if self.split:
            sizes = dim_sizes(padded)
            extra = [(st - size % st) % st for size, st in zip(sizes, strides)]
            if any(_maybe_nonzero(e) for e in extra):
                rows = [[0, e] for e in extra]
                self.tensor = tf.pad(padded, rows if all(is_int(e) for e in extra)
                                     else tf.stack([vector(row) for row in rows]))
            shape = []
            for size, e, st in zip(sizes, extra, strides):
                shape += [(size + e) // st, st] if st > 1 else [size]
            if self.merged:
                shape[-2:] = [shape[-2] * shape[-1]]
            self.tensor = tf.reshape(self.tensor, vector(shape))

    def at(self, offsets, shape=None) -> tf.Tensor:
        window = self.window
        starts = [o * dil for o, dil in zip(offsets, window.window_dilations)]
        if not self.split:
            end = [b + span for b, span in zip(starts, self.spans)]
            view = tf.strided_slice(self.tensor, vector(starts), vector(end),
                                    vector(window.strides))
        elif any(is_int(c) and c == 0 for c in self.counts):
            # No window fits along some dimension: the view is empty, and a slice could not
            # start at the offset (TF's Slice wants begin 0 in an empty dimension).
            view = tf.zeros(vector(self.counts), self.tensor.dtype)
        else:
            begin, size = [], []
            for start, count, span, st in zip(starts, self.counts, self.spans, window.strides):
                if st > 1:
                    begin += [start // st, start % st]
                    size += [count, 1]
                else:
                    begin.append(start)
                    size.append(span)
            if self.merged:  # [.., o % s, 0] of [.., s, C] is [.., (o % s) * C] of [.., s * C]
                begin[-2:] = [begin[-2] * size[-1] + begin[-1]]
                size[-2:] = [size[-1]]
            view = tf.reshape(tf.slice(self.tensor, vector(begin), vector(size)),
                              vector(self.counts))
        if shape is not None:
            view.set_shape(shape)
        return view


def window_offsets(k, window: Window) -> list:
    """Window position number `k` (row-major) as per-dimension offsets."""
    offsets, rest = [], k
    for w in reversed(window.dims):
        offsets.append(rest % w)
        rest = rest // w
    return offsets[::-1]


def static_or_unstacked(t: tf.Tensor) -> list:
    value = tf.get_static_value(t)
    if value is not None:
        return [int(v) for v in np.asarray(value).reshape(-1)]
    return tf.unstack(tf.cast(t, tf.int32))
