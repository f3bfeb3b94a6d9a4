"""StableHLO scatter as TF ops, with XLA CPU's semantics where TF's differ.

- scatter skips an update whose whole window does not fit, and applies no clamp: a window
  partly out of range is skipped whole, as XLA does. TF's tensor_scatter_nd_* fail on an index
  out of range, so skipped updates are dropped before them.
- scatter with replacement keeps the update that comes last in XLA's order (scatter indices in
  row-major order) where an element is written twice; TF leaves that winner unspecified, so
  the earlier duplicates are dropped first.
- scatter max/min propagate NaN and order -0.0 below +0.0 as stablehlo.maximum/minimum do;
  TF's kernels do neither.
- scatter multiply of floats applies the updates one after another in XLA's order (their
  product first would round and overflow differently); complex64 ones update by update, with
  the fused multiply-adds XLA's scatter loop has (`elementwise.complex_multiply`).
- scatter bodies other than replace, add, multiply, max, min (and and/or of booleans), e.g.
  `x.at[i].apply(f)` or JAX's lexicographic max of complex numbers, run update by update in
  XLA's order through the body's own lowering (a tf.while_loop: exact, but slow for many
  updates).
- refused: a scatter with empty index vectors and several updates (all into one window),
  where XLA's CPU result departs from StableHLO's semantics (`check_scatter`).

Scatter goes through one tf.tensor_scatter_nd_* on a grid of full index vectors built from the
start indices, the batching dimensions' positions (vmap of indexing) and the window offsets
(`index_vectors`), as gather does (`indexing`).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain import elementwise as ew
from tf_ops.plain import index_vectors as iv
from tf_ops.plain import op_rows
from tf_ops.plain.program import Op


# Scatter bodies run as one TF scatter op (other combiners, e.g. xor, run update by update).
_SCATTER_COMBINERS = ("add", "multiply", "max", "min", "and", "or")


def _combiner(op: Op) -> str | None:
    """What the update computation does: "replace" (returns the update), "keep" (returns the
    old value), or one of _SCATTER_COMBINERS; None for any other body, which runs update by
    update (`_scatter_in_order`; its ops are checked as the program's nested ops, so e.g. a
    maximum of complex numbers is refused there)."""
    region = op.regions[0]
    n = len(op.results)
    olds, news = region.args[:n], region.args[n:]
    if region.returns == news:
        return "replace"
    if region.returns == olds:
        return "keep"
    if n != 1 or len(region.ops) != 1:
        return None
    body = region.ops[0]
    if (op_rows.combiner(body.name) in _SCATTER_COMBINERS
            and sorted(body.operands) == sorted(region.args)
            and region.returns == body.results):
        return op_rows.combiner(body.name)
    return None


def check_scatter(op: Op) -> str | None:
    dn = op.attr("scatter_dimension_numbers")
    n = len(op.results)
    indices = op.operand_types[n]
    ivd = dn["index_vector_dim"]
    scatter_sizes = [s for a, s in enumerate(indices.shape) if a != ivd]
    if (not dn["scattered_dims_to_operand_dims"] and not dn["input_batching_dims"]
            and any(s != 1 for s in scatter_sizes)):
        # Found by fuzzing against JAX 0.10 on CPU: e.g. 3 updates into a 3-vector with empty
        # index vectors land one per element, 2 into a 4-vector keep only the last; StableHLO
        # sends them all to element 0.
        return ("its index vectors are empty, so every update targets the same window, and "
                "XLA's CPU result for that departs from StableHLO's semantics")
    return None


def scatter(ctx, op: Op, *inputs):
    n = len(op.results)
    operands, indices, updates = inputs[:n], inputs[n], inputs[n + 1:]
    kind = _combiner(op)
    if kind == "keep":
        return [tf.identity(x) for x in operands]
    dn = op.attr("scatter_dimension_numbers")
    scalar = operands[0].shape.rank == 0
    if scalar:  # TF scatters into no scalar: into a vector of one element instead
        operands = [tf.reshape(x, [1]) for x in operands]
    points, positions = _scatter_points(operands[0], indices, updates[0], dn, scalar)
    if kind == "replace" and not op.attr("unique_indices", False):
        last = _last_of_duplicates(points, tf.shape(operands[0], out_type=iv.I64))
        points, positions = tf.gather(points, last), tf.gather(positions, last)
    values = [tf.gather(_flat_updates(update, dn), positions) for update in updates]
    if kind == "multiply" and operands[0].dtype in (tf.complex64, tf.complex128):
        results = _scatter_in_order(ctx, None, operands, points, values,
                                    lambda old, new: [ew.complex_multiply(old[0], new[0],
                                                                          scatter=True)])
    elif kind is None or (kind in ("and", "or") and operands[0].dtype != tf.bool):
        results = _scatter_in_order(ctx, op.regions[0], operands, points, values)
    else:
        results = [_combine(kind, x, points, v) for x, v in zip(operands, values)]
    return [tf.reshape(x, []) for x in results] if scalar else results


def _updates_scatter_major(update, dn: dict):
    """Updates with their scatter dimensions first, then the window dimensions (both in
    order): row-major order is then XLA's order of application."""
    window = sorted(dn["update_window_dims"])
    scatter_axes = [a for a in range(update.shape.rank) if a not in window]
    perm = scatter_axes + window
    return tf.transpose(update, perm) if perm != list(range(len(perm))) else update


def _flat_updates(update, dn):
    return tf.reshape(_updates_scatter_major(update, dn), [-1])


def _scatter_points(operand, indices, update, dn: dict, scalar: bool):
    """The operand index of every update element whose window fits ([K, rank] int64), and
    those elements' positions in the scatter-major flattened updates ([K])."""
    rank = 0 if scalar else operand.shape.rank
    ivd = dn["index_vector_dim"]
    indices = iv.index_vectors_last(indices, ivd)
    n_scatter = indices.shape.rank - 1
    update = _updates_scatter_major(update, dn)
    n_window = update.shape.rank - n_scatter
    to_operand = list(dn["scattered_dims_to_operand_dims"])
    batching = {d: iv.batch_axis(i, ivd) for d, i in
                zip(dn["input_batching_dims"], dn["scatter_indices_batching_dims"])}
    inserted = set(dn["inserted_window_dims"])
    window_dims = [d for d in range(rank) if d not in inserted and d not in batching]
    grid_shape = tf.shape(update, out_type=iv.I64)
    scatter_shape, window_shape = grid_shape[:n_scatter], grid_shape[n_scatter:]
    dims = tf.shape(operand, out_type=iv.I64)
    grid_rank = n_scatter + n_window
    fits = tf.fill(scatter_shape, True)
    components = []
    for d in range(rank):
        c = tf.zeros([1] * grid_rank, iv.I64)
        if d in batching:
            c = iv.along(tf.range(scatter_shape[batching[d]]), batching[d], grid_rank)
        elif d in to_operand:
            start = iv.as_int64(indices[..., to_operand.index(d)])
            size = window_shape[window_dims.index(d)] if d in window_dims else 1
            fits = tf.logical_and(fits, tf.logical_and(start >= 0, start <= dims[d] - size))
            c = iv.trailing_ones(start, n_window)
        if d in window_dims:
            c = c + iv.along(tf.range(window_shape[window_dims.index(d)]),
                           n_scatter + window_dims.index(d), grid_rank)
        components.append(tf.reshape(tf.broadcast_to(c, grid_shape), [-1]))
    if scalar:
        components = [tf.zeros([tf.reduce_prod(grid_shape)], iv.I64)]
    points = tf.stack(components, -1) if components else \
        tf.zeros([tf.reduce_prod(grid_shape), 0], iv.I64)
    fits = tf.reshape(tf.broadcast_to(iv.trailing_ones(fits, n_window), grid_shape), [-1])
    positions = tf.reshape(tf.where(fits), [-1])
    return tf.gather(points, positions), positions


def _linear(points, dims):
    """Row-major positions of the operand indices `points` ([K, rank] -> [K])."""
    strides = tf.math.cumprod(dims, exclusive=True, reverse=True)
    return tf.reduce_sum(points * strides, axis=1)


def _last_of_duplicates(points, dims):
    """Which rows of `points` (in application order) are the last to write their element."""
    linear = _linear(points, dims)
    order = tf.argsort(linear, stable=True)
    ordered = tf.gather(linear, order)
    is_last = tf.concat([tf.not_equal(ordered[1:], ordered[:-1]), tf.fill([tf.minimum(
        tf.size(ordered), 1)], True)], 0)
    return tf.boolean_mask(order, is_last)


def _combine(kind: str, operand, points, values):
    dtype = operand.dtype
    if kind == "replace":
        return tf.tensor_scatter_nd_update(operand, points, values)
    if dtype == tf.bool:  # add/or/max are "or", multiply/and/min are "and"
        extreme = tf.tensor_scatter_nd_max if kind in ("add", "or", "max") else \
            tf.tensor_scatter_nd_min
        return tf.cast(extreme(tf.cast(operand, tf.uint8), points, tf.cast(values, tf.uint8)),
                       tf.bool)
    if kind == "add":
        return tf.tensor_scatter_nd_add(operand, points, values)
    if kind == "multiply":
        return _scatter_multiply(operand, points, values)
    return _scatter_extreme(operand, points, values, kind == "max")


def _scatter_multiply(operand, points, values):
    """No TF scatter multiplies. Integer products wrap alike in any order: the updates of each
    element are multiplied together (unsorted_segment_prod), then into the element. Float
    products round (and overflow) differently in another order, so they run as XLA applies
    them, `((x * u1) * u2) * ...`: each element's factors form a row, the element first, then
    its updates in application order, padded with ones (exact), folded by TF's sequential
    cumprod."""
    dims = tf.shape(operand, out_type=iv.I64)
    linear = _linear(points, dims)
    flat = tf.reshape(operand, [-1])
    if operand.dtype not in ds.FLOATS:
        targets, segment = tf.unique(linear, out_idx=iv.I64)
        product = tf.math.unsorted_segment_prod(values, segment,
                                                tf.size(targets, out_type=iv.I64))
        current = tf.gather(flat, targets)
        flat = tf.tensor_scatter_nd_update(flat, targets[:, None], current * product)
        return tf.reshape(flat, dims)
    order = tf.argsort(linear, stable=True)  # by element, application order within one
    ordered = tf.gather(linear, order)
    targets, segment = tf.unique(ordered, out_idx=iv.I64)  # segments ascend with `ordered`
    count = tf.size(targets, out_type=iv.I64)
    position = tf.range(tf.size(ordered, out_type=iv.I64))
    rank_in_segment = position - tf.gather(tf.math.unsorted_segment_min(position, segment,
                                                                        count), segment)
    width = tf.reduce_max(tf.concat([rank_in_segment, [-1]], 0)) + 1
    factors = tf.tensor_scatter_nd_update(
        tf.ones(tf.stack([count, width]), operand.dtype),
        tf.stack([segment, rank_in_segment], 1), tf.gather(values, order))
    rows = tf.concat([tf.gather(flat, targets)[:, None], factors], 1)
    product = tf.math.cumprod(rows, axis=1)[:, -1]
    flat = tf.tensor_scatter_nd_update(flat, targets[:, None], product)
    return tf.reshape(flat, dims)


def _scatter_extreme(operand, points, values, is_max: bool):
    scatter_fn = tf.tensor_scatter_nd_max if is_max else tf.tensor_scatter_nd_min
    if operand.dtype not in ds.FLOATS:
        return scatter_fn(operand, points, values)
    # NaN wins in stablehlo.maximum/minimum: NaNs are taken out of TF's max/min (as the
    # identity), and put back where the operand held one or an update brought one. TF's
    # kernels return either zero where -0.0 and +0.0 tie: the max is +0.0 if the operand or
    # an update is (bits 0), the min -0.0 (bits INT_MIN), found the same way.
    identity = tf.constant(-np.inf if is_max else np.inf, operand.dtype)
    nan_values = tf.math.is_nan(values)
    nan_operand = tf.math.is_nan(operand)
    result = scatter_fn(tf.where(nan_operand, identity, operand), points,
                        tf.where(nan_values, identity, values))
    int_type = {2: tf.int16, 4: tf.int32, 8: tf.int64}[operand.dtype.size]
    zero_bits = tf.constant(0 if is_max else int_type.min, int_type)
    flags = tf.where(nan_values, tf.constant(2, tf.int8), tf.cast(
        tf.equal(tf.bitcast(values, int_type), zero_bits), tf.int8))
    flags = tf.tensor_scatter_nd_max(tf.zeros(tf.shape(operand), tf.int8), points, flags)
    wanted_zero = tf.logical_or(tf.equal(flags, 1),
                                tf.equal(tf.bitcast(operand, int_type), zero_bits))
    result = tf.where(tf.logical_and(wanted_zero, tf.equal(result, 0)),
                      ds.scalar(0.0 if is_max else -0.0, operand.dtype), result)
    nan = tf.constant(np.nan, operand.dtype)
    return tf.where(tf.logical_or(nan_operand, tf.equal(flags, 2)), nan, result)


def _scatter_in_order(ctx, region, operands, points, values, combine=None):
    """Any update computation (e.g. `x.at[i].apply(f)`, bitwise and/or of integers): one
    update element at a time, in XLA's order, through the body's own lowering (or
    `combine(olds, news)`)."""
    dims = tf.shape(operands[0], out_type=iv.I64)
    linear = _linear(points, dims)
    count = tf.size(linear, out_type=iv.I64)

    def body(k, *flats):
        target = tf.reshape(linear[k], [1, 1])
        olds = [tf.reshape(tf.gather_nd(f, target), []) for f in flats]
        news = [v[k] for v in values]
        combined = combine(olds, news) if combine else ctx.region(region, olds + news)
        return (k + 1,) + tuple(tf.tensor_scatter_nd_update(f, target, tf.reshape(c, [1]))
                                for f, c in zip(flats, combined))

    flats = [tf.reshape(x, [-1]) for x in operands]
    _, *flats = tf.while_loop(lambda k, *_: k < count, body,
                              [tf.constant(0, iv.I64)] + flats, parallel_iterations=1)
    return [tf.reshape(f, dims) for f in flats]
