"""Indexing StableHLO ops as TF ops: gather, dynamic_gather, dynamic_slice and
dynamic_update_slice, with StableHLO's (XLA CPU's) index semantics where TF's differ (scatter
is in `scatter`, the index helpers both use in `index_vectors`).

- gather and dynamic_slice clamp every start index so the whole slice is in bounds
  (dynamic_update_slice likewise for the update); TF's gather_nd fails on CPU for an index out
  of range, so the clamp comes first.
Gather and scatter go through one tf.gather_nd / tf.tensor_scatter_nd_* on a grid of full
index vectors built from the start indices, the batching dimensions' positions (vmap of
indexing) and the window offsets. Gather keeps whole the operand dimensions it does not index
(sliced to the window first), so an embedding lookup gathers rows, not elements. Every size is
read at run time (`tf.shape`), so symbolic dimensions stay None in graphs.
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from tf_ops.plain import index_vectors as iv
from tf_ops.plain.program import Op


# ------------------------------------------------------------------------------- gather

def gather(ctx, op: Op, operand, indices):
    return _gather(operand, indices, op.attr("dimension_numbers"),
                   [int(s) for s in op.attr("slice_sizes")])


def dynamic_gather(ctx, op: Op, operand, indices, slice_sizes):
    sizes = tf.cast(slice_sizes, iv.I64)
    return _gather(operand, indices, op.attr("dimension_numbers"),
                   [sizes[d] for d in range(operand.shape.rank)])


def _gather(operand, indices, dn: dict, slice_sizes: list):
    rank = operand.shape.rank
    ivd = dn["index_vector_dim"]
    taken = _take(operand, indices, dn, slice_sizes)
    if taken is not None:
        return taken
    indices = iv.index_vectors_last(indices, ivd)
    n_batch = indices.shape.rank - 1
    start_map = list(dn["start_index_map"])
    collapsed = set(dn["collapsed_slice_dims"])
    batching = {d: iv.batch_axis(i, ivd) for d, i in
                zip(dn["operand_batching_dims"], dn["start_indices_batching_dims"])}
    indexed = sorted(set(start_map) | set(batching))
    rest = [d for d in range(rank) if d not in indexed]
    dims = tf.shape(operand, out_type=iv.I64)
    sizes = [iv.int64(s) for s in slice_sizes]

    # A dimension no index moves has its window at 0: slice it, then the gather takes it whole.
    static = operand.shape.as_list()
    if any(not (isinstance(slice_sizes[d], int) and slice_sizes[d] == static[d]) for d in rest):
        # int32 begin and size: TFLite's Slice with int64 ones keeps a stale output size
        # under a dynamic batch (the gather after it then reads out of bounds).
        size = tf.cast(tf.stack([tf.constant(-1, iv.I64) if d in indexed else sizes[d]
                                 for d in range(rank)]), tf.int32)
        operand = tf.slice(operand, tf.zeros([rank], tf.int32), size)

    if len(indexed) == 1 and not batching and indexed[0] in collapsed:
        # One index picks one element of one axis (x[i], x[:, i], emb[tokens]): tf.gather on
        # that axis, with no transpose of the operand. Axes: rest before d, batch, rest after.
        d = indexed[0]
        out = tf.gather(operand, iv.clamped(indices[..., 0], dims[d] - 1), axis=d)
        rest_axes = [a if a < d else a + n_batch - 1 for a in rest]
        return _arrange(out, list(range(d, d + n_batch)), dict(zip(rest, rest_axes)),
                        collapsed, dn["offset_dims"])

    order = indexed + rest
    if order != list(range(rank)):
        operand = tf.transpose(operand, order)
    # One index vector per (batch position, window offset of the indexed dimensions).
    windowed = [d for d in indexed if d not in batching and d not in collapsed]
    n_window = len(windowed)
    @functools.cache
    def batch_shape():  # built only if an op needs it (none does for one indexed dimension)
        return tf.shape(indices, out_type=iv.I64)[:-1]

    def grid_shape():
        return tf.concat([batch_shape(), tf.stack([sizes[d] for d in windowed])
                          if windowed else tf.zeros([0], iv.I64)], 0)

    components = []
    for d in indexed:
        if d in batching:
            axis = batching[d]
            c = iv.along(tf.range(batch_shape()[axis]), axis, n_batch + n_window)
        else:
            start = iv.clamped(indices[..., start_map.index(d)], dims[d] - sizes[d])
            c = iv.trailing_ones(start, n_window)
            if d in windowed:
                c = c + iv.along(tf.range(sizes[d]), n_batch + windowed.index(d),
                               n_batch + n_window)
        # One indexed dimension's vector already spans the grid (its batch, its window); a
        # BroadcastTo to the computed grid shape would be the only one (pos_emb[:t]: Core ML's
        # converter refuses it).
        components.append(c if len(indexed) == 1 and not batching
                          else tf.broadcast_to(c, grid_shape()))
    grid = tf.stack(components, -1) if components else \
        tf.zeros(tf.concat([grid_shape(), [0]], 0), iv.I64)
    out = tf.gather_nd(operand, grid)  # [batch..., windowed..., rest...]
    axes = {d: n_batch + i for i, d in enumerate(windowed + rest)}
    return _arrange(out, list(range(n_batch)), axes, collapsed, dn["offset_dims"])


def _take(operand, indices, dn: dict, slice_sizes: list):
    """`tf.gather(operand, i, axis=d)` when the gather takes whole slices along one axis by
    one index each (x[i], x[:, i], an embedding lookup) and its result keeps TF's axis order,
    as a TF engineer writes it; else None. The indices are clamped into range as StableHLO
    clamps them (at conversion when they are constants)."""
    rank = operand.shape.rank
    ivd = dn["index_vector_dim"]
    start_map, collapsed = list(dn["start_index_map"]), list(dn["collapsed_slice_dims"])
    # tf.gather takes int32/int64 indices only; other index types keep the general path.
    if len(start_map) != 1 or collapsed != start_map or dn["operand_batching_dims"] \
            or indices.dtype not in (tf.int32, tf.int64):
        return None
    d = start_map[0]
    static = operand.shape.as_list()
    if any(not isinstance(slice_sizes[a], int) or slice_sizes[a] != static[a]
           for a in range(rank) if a != d):
        return None
    n_batch = indices.shape.rank - (0 if ivd == indices.shape.rank else 1)
    if ivd != indices.shape.rank:
        if ivd != indices.shape.rank - 1 or indices.shape[-1] != 1:
            return None
    # TF's gather puts the index's dimensions at d: the result's offset dims must be there.
    offsets = [a for a in range(rank + n_batch - 1) if not d <= a < d + n_batch]
    if list(dn["offset_dims"]) != offsets:
        return None
    limit = static[d] - 1 if static[d] is not None else \
        tf.shape(operand, out_type=indices.dtype)[d] - 1
    known = tf.get_static_value(indices) \
        if tf.executing_eagerly() or indices.op.type == "Const" else None
    if known is not None and isinstance(limit, int):
        index = tf.constant(np.clip(known, 0, max(limit, 0)).astype(known.dtype).reshape(
            known.shape[:n_batch]))
    else:
        index = indices if ivd == indices.shape.rank else tf.squeeze(indices, -1)
        index = tf.clip_by_value(index, tf.zeros([], index.dtype),
                                 tf.cast(tf.maximum(limit, 0), index.dtype))
    return tf.gather(operand, index, axis=d)


def _arrange(out, batch_axes: list, axis_of: dict, collapsed: set, offset_dims):
    """A gather's result from `out`, whose axes are `batch_axes` (the batch dimensions, in
    order) and `axis_of[d]` for each operand dimension d whose window it holds; collapsed
    dimensions among those (size 1) are dropped, the rest become the result's offset dims."""
    dropped = sorted(a for d, a in axis_of.items() if d in collapsed)
    if dropped:
        keep = [a for a in range(out.shape.rank) if a not in dropped]
        out = tf.reshape(out, tf.gather(tf.shape(out, out_type=iv.I64),
                                        tf.constant(keep, tf.int32)))
        renumber = {a: i for i, a in enumerate(keep)}
        batch_axes = [renumber[a] for a in batch_axes]
        axis_of = {d: renumber[a] for d, a in axis_of.items() if d not in collapsed}
    window_dims = sorted(axis_of)  # the result's offset dims follow operand order
    offset_dims = list(offset_dims)
    perm, batch = [], iter(batch_axes)
    for p in range(len(batch_axes) + len(window_dims)):
        perm.append(axis_of[window_dims[offset_dims.index(p)]] if p in offset_dims
                    else next(batch))
    return tf.transpose(out, perm) if perm != list(range(len(perm))) else out


# ------------------------------------------------------------------------ dynamic slices

def dynamic_slice(ctx, op: Op, operand, *starts):
    sizes = [int(s) for s in op.attr("slice_sizes")]
    if not sizes:
        return tf.identity(operand)
    dims = tf.shape(operand, out_type=iv.I64)
    begin = tf.stack([iv.clamped(s, dims[d] - sizes[d]) for d, s in enumerate(starts)])
    return tf.slice(operand, begin, tf.constant(sizes, iv.I64))


def dynamic_update_slice(ctx, op: Op, operand, update, *starts):
    """The update padded to the operand's shape at its clamped place, chosen by a mask."""
    if operand.shape.rank == 0:
        return tf.identity(update)
    dims = tf.shape(operand, out_type=iv.I64)
    update_dims = tf.shape(update, out_type=iv.I64)
    low = tf.stack([iv.clamped(s, dims[d] - update_dims[d]) for d, s in enumerate(starts)])
    paddings = tf.stack([low, dims - update_dims - low], axis=1)
    mask = tf.pad(tf.fill(tf.shape(update), True), paddings)
    return tf.where(mask, tf.pad(update, paddings), operand)
