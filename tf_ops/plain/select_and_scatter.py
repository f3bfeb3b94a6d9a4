"""`stablehlo.select_and_scatter` (the max-pool gradient) as TF ops, on the windowed view of
`windows.py`.

It picks, per window, the first position in window order and then moves on whenever the select
body says "keep" no longer holds (GE: the first maximum), never selecting padding, then
combines each window's source value into its selected position with the scatter body, in XLA's
order (so f16/bf16 sums round after every step as XLA's do). Select and scatter bodies must be
elementwise (JAX writes compare and add/or).
"""
from __future__ import annotations

import dataclasses
import itertools

import tensorflow as tf

from tf_ops.plain.program import Op
from tf_ops.plain.windowed_view import (
    View,
    Window,
    dim_sizes,
    is_int,
    vector,
    window_offsets,
    window_padded,
)
from tf_ops.plain.windows import UNROLLED, body_reason, broadened, run_body


def check_select_and_scatter(op: Op) -> str | None:
    select, scatter = op.regions
    why = body_reason(select)
    if why:
        return f"select_and_scatter's select: {why}"
    if any(p < 0 for row in (op.attr("padding") if op.attr("padding") is not None else [])
           for p in row):
        return "select_and_scatter with negative padding"
    why = body_reason(scatter)
    if why:
        return f"select_and_scatter's scatter: {why}"
    return None


def select_and_scatter(ctx, op: Op, operand, source, init):
    select_region, scatter_region = op.regions
    rank = operand.shape.rank
    window = Window.of(op, rank)
    window = dataclasses.replace(window, base_dilations=[1] * rank,
                                 window_dilations=[1] * rank)
    select_ops = broadened(select_region, rank)
    scatter_ops = broadened(scatter_region, rank)
    if 0 in op.operand_types[1].shape or window.positions == 0:
        return tf.fill(tf.shape(operand), init)  # no window: nothing is scattered
    padded = window_padded(operand, tf.zeros([], operand.dtype), window)
    valid = window_padded(tf.ones(tf.shape(operand), tf.bool), tf.constant(False), window)
    view, valid = View(padded, window), View(valid, window)
    positions = list(itertools.product(*[range(w) for w in window.dims]))
    chosen = view.at(positions[0])
    chosen_k = tf.zeros(tf.shape(chosen), tf.int32)
    found = valid.at(positions[0])
    shape = chosen.shape

    def step(k, offsets, chosen, chosen_k, found):
        candidate = view.at(offsets, shape)
        candidate_valid = valid.at(offsets, shape)
        keep = run_body(ctx, select_region, select_ops, [chosen, candidate])[0]
        take = tf.logical_and(candidate_valid,
                              tf.logical_or(tf.logical_not(found), tf.logical_not(keep)))
        chosen = tf.where(take, candidate, chosen)
        chosen_k = tf.where(take, tf.fill(tf.shape(chosen_k), tf.cast(k, tf.int32)), chosen_k)
        return chosen, chosen_k, tf.logical_or(found, candidate_valid)

    if window.positions <= UNROLLED:
        for k, offsets in enumerate(positions[1:], start=1):
            chosen, chosen_k, found = step(k, list(offsets), chosen, chosen_k, found)
    else:
        def body(k, chosen, chosen_k, found):
            return (k + 1, *step(k, window_offsets(k, window), chosen, chosen_k, found))
        _, chosen, chosen_k, found = tf.while_loop(
            lambda k, *_: k < window.positions, body, (tf.constant(1), chosen, chosen_k, found),
            parallel_iterations=1)
    return _scatter_selected(ctx, scatter_region, scatter_ops, operand, padded, source, init,
                             chosen_k, found, window)


def _scatter_selected(ctx, scatter_region, scatter_ops, operand, padded, source, init,
                      chosen_k, found, window: Window):
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
    result = tf.fill(vector(split_shape), init)

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
        expanded = tf.reshape(values, vector(shape))
        rows = rows if all(is_int(v) for row in rows for v in row) else \
            tf.stack([vector(row) for row in rows])
        return tf.pad(expanded, rows, constant_values=fill)

    def step(k, offsets, result):
        here = tf.logical_and(found, tf.equal(chosen_k, tf.cast(k, tf.int32)))
        values = place(offsets, tf.where(here, source, tf.fill(tf.shape(source), zero)), zero)
        mask = place(offsets, here, tf.constant(False))
        combined = run_body(ctx, scatter_region, scatter_ops, [result, values])[0]
        combined.set_shape(result.shape)
        return tf.where(mask, combined, result)

    positions = window.positions
    if positions <= UNROLLED:
        for k, offsets in reversed(list(enumerate(
                itertools.product(*[range(w) for w in window.dims])))):
            result = step(k, list(offsets), result)
    else:
        def body(i, result):
            k = positions - 1 - i
            return i + 1, step(k, window_offsets(k, window), result)
        _, result = tf.while_loop(lambda i, _: i < positions, body, (tf.constant(0), result),
                                  parallel_iterations=1)
    result = tf.reshape(result, vector([size + e for size, e in zip(padded_shape, extra)]))
    lows = [lo for lo, _ in window.padding]
    return tf.strided_slice(result, lows, vector([lo + s for lo, s in
                                                   zip(lows, dim_sizes(operand))]))
