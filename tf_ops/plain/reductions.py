"""`stablehlo.reduce` as TF's reduce ops, with StableHLO's semantics where TF's differ.

The body is recognized by its ops; what is not recognized is refused at conversion:
- each result `i` is one of add/multiply/maximum/minimum/and/or/xor of accumulator `i` and
  element `i` (plain sums, products, max/min, all/any, and the independent per-operand bodies
  of variadic reduces);
- JAX's argmax/argmin body (`jnp.argmax`, `lax.argmax`): values compared GT/LT with NaN
  winning, ties broken on the lower index.

Where TF and XLA differ:
- float max/min propagate NaN (TF's reduce_max/min do not reliably), as StableHLO specifies;
  XLA's CPU backend itself drops NaNs from long max/min reductions (measured: jnp.max of
  1000 values with one NaN is NaN, of 5000 values is not), where this lowering still gives NaN;
- float max/min order -0.0 below +0.0 (TF's kernels return either zero on that tie);
- and/or/xor of integers have no TF reduce op: reduced bit by bit;
- f16/bf16 sums and products accumulate in float32 and round once. XLA's CPU backend rounds
  every partial result to the narrow type (in a 32-wide tree), so long sums differ from JAX by
  up to a few of the narrow type's ulps; the result is the more accurate one;
- the init value is applied once, as `body(init, reduction)` (XLA's CPU loop starts its
  accumulator from it; an identity init adds no op, `combine_init`), and an empty reduction
  gives the init value exactly;
- float sums run in TF's order, not XLA's (a tree of 32-wide sequential windows below about
  4,000 elements, YNNPACK's vectorized kernels above): they agree to rounding, and partial sums
  that overflow in one order only can make one result infinite and the other finite.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain import elementwise as ew
from tf_ops.plain import op_rows
from tf_ops.plain.program import Op, Region

_SAME_WIDTH_INT = {tf.float16: tf.int16, tf.bfloat16: tf.int16, tf.float32: tf.int32,
                   tf.float64: tf.int64}
# The integer and boolean bodies' ops applied to (init, reduction): elementwise.py's semantics.
_BITWISE = {"stablehlo.and": tf.bitwise.bitwise_and, "stablehlo.or": tf.bitwise.bitwise_or,
            "stablehlo.xor": tf.bitwise.bitwise_xor}
_LOGICAL = {"stablehlo.and": tf.logical_and, "stablehlo.or": tf.logical_or,
            "stablehlo.xor": tf.math.logical_xor}


# ------------------------------------------------------------------------ recognizing bodies

def _producers(region: Region) -> dict:
    return {result: op for op in region.ops for result in op.results}


def per_operand_monoids(region: Region) -> list[str] | None:
    """The op names if result `i` of `region` is `op_i(acc_i, x_i)` for every `i`, each op a
    combiner in its op_table row (add, multiply, max, min, and, or, xor), else None."""
    n = len(region.args) // 2
    producers = _producers(region)
    names = []
    for i, value in enumerate(region.returns):
        op = producers.get(value)
        if op is None or op_rows.combiner(op.name) is None or len(op.operands) != 2:
            return None
        if sorted(op.operands) != sorted((region.args[i], region.args[n + i])):
            return None
        names.append(op.name)
    return names


def _term(value, producers, args):
    """`value` as a nested tuple (op name, direction, operand terms...): structure only, for
    comparing a body with the form JAX writes; and/or operands are put in a fixed order."""
    if value in args:
        return ("arg", args.index(value))
    op = producers.get(value)
    if op is None:
        return ("outer", value)
    children = tuple(_term(v, producers, args) for v in op.operands)
    if op.name in ("stablehlo.and", "stablehlo.or"):
        children = tuple(sorted(children, key=repr))
    if op.name == "stablehlo.compare":
        return (op.name, op.attr("comparison_direction")) + children
    if op.name == "stablehlo.constant":
        return (op.name, repr(op.attr("value")))
    return (op.name,) + children


def _arg_select_form(direction: str):
    """The terms of JAX's argmax (direction GT) / argmin (LT) body over (acc value, acc index,
    value, index) = args 0..3: NaN wins, then the larger (smaller), ties to the lower index."""
    a_v, a_i, b_v, b_i = (("arg", k) for k in range(4))

    def logical(name, x, y):
        return (name,) + tuple(sorted((x, y), key=repr))

    cmp = "stablehlo.compare"
    pick = logical("stablehlo.or", (cmp, direction, a_v, b_v), (cmp, "NE", a_v, a_v))
    value = ("stablehlo.select", pick, a_v, b_v)
    tie = logical("stablehlo.and", (cmp, "EQ", a_v, b_v), (cmp, "LT", a_i, b_i))
    index = ("stablehlo.select", logical("stablehlo.or", pick, tie), a_i, b_i)
    return value, index


def arg_reduce_direction(region: Region) -> str | None:
    """"GT" for JAX's argmax body, "LT" for argmin's, else None."""
    if len(region.args) != 4 or len(region.returns) != 2:
        return None
    for op in region.ops:
        if op.name == "stablehlo.compare" and op.attr("compare_type") == "TOTALORDER":
            return None  # NE(a, a) is never true there: another semantics
    producers = _producers(region)
    got = tuple(_term(v, producers, list(region.args)) for v in region.returns)
    for direction in ("GT", "LT"):
        if got == _arg_select_form(direction):
            return direction
    return None


def check_reduce(op: Op) -> str | None:
    body = op.regions[0]
    elements = [t.element for t in op.operand_types[:len(op.operand_types) // 2]]
    monoids = per_operand_monoids(body)
    if monoids is not None:
        for name, element in zip(monoids, elements):
            if element.startswith("complex") and name in ("stablehlo.maximum",
                                                          "stablehlo.minimum"):
                return "max/min of complex numbers (lexicographic in XLA) has no TF reduce op"
        return None
    if arg_reduce_direction(body) is not None:
        if elements[0].startswith("complex"):
            return "argmax/argmin of complex numbers has no TF op"
        return None
    ops = ", ".join(o.name.split(".")[-1] for o in body.ops) or "none"
    return (f"the reduce body (ops: {ops}) is not one TF can compute: plain add, multiply, "
            f"max, min, and, or, xor per operand, or JAX's argmax/argmin")


# ------------------------------------------------------------------------ lowering

def reduce(ctx, op: Op, *inputs):
    n = len(inputs) // 2
    operands, inits = list(inputs[:n]), list(inputs[n:])
    dims = [int(d) for d in op.attr("dimensions")]
    body = op.regions[0]
    monoids = per_operand_monoids(body)
    if monoids is not None:
        results = []
        for i, (name, x, init) in enumerate(zip(monoids, operands, inits)):
            reduced = monoid_reduce(name, x, dims)
            combined = combine_init(name, init, ctx.splat(op.operands[n + i]), reduced,
                                    tf_sum=True)
            results.append(_init_if_empty(x, dims, init, combined))
        return results
    direction = arg_reduce_direction(body)
    if direction is None:
        raise AssertionError("refused by check_reduce")
    return _arg_reduce(direction, operands, inits, dims)


def combine_init(name: str, init: tf.Tensor, init_const, value: tf.Tensor,
                 tf_sum: bool = False) -> tf.Tensor:
    """`body(init, value)` for the single-op body `name`, as XLA's loop starting from `init`
    gives it; `init_const` is the init's constant scalar if known (`Context.splat`), and
    `tf_sum` says that `value` is a sum TF's kernels started from +0.0.

    An identity init adds no op, and never a graph pattern (`fill(0) + x`) that TF's
    optimizer would simplify away. A +0.0 init of a sum turns -0.0 into +0.0, which a TF sum
    has done already (a sum of -0.0s is +0.0 there, as XLA's 0 + -0 + ...).
    """
    dtype = value.dtype
    if init_const is not None and name == "stablehlo.add" and dtype.is_floating \
            and bool(init_const == 0) and not np.signbit(init_const):
        return value if tf_sum else ew.plus_zero(value)
    if init_const is not None and _is_identity(name, init_const, dtype):
        return value
    init = _broadcast_like(init, value)
    if name in ("stablehlo.maximum", "stablehlo.minimum"):
        return ew.max_min(name == "stablehlo.maximum", init, value, init_const, None)
    if name == "stablehlo.add":
        return tf.logical_or(init, value) if dtype == tf.bool else tf.add(init, value)
    if name == "stablehlo.multiply":
        return tf.logical_and(init, value) if dtype == tf.bool else tf.multiply(init, value)
    return (_LOGICAL if dtype == tf.bool else _BITWISE)[name](init, value)


def _is_identity(name: str, value: np.ndarray, dtype: tf.DType) -> bool:
    """Whether `body(value, x) == x` for every x (bit for bit where XLA's loop gives it)."""
    if dtype == tf.bool:
        return bool(value) == (name in ("stablehlo.multiply", "stablehlo.minimum",
                                        "stablehlo.and"))
    if name == "stablehlo.add":  # -0.0 for floats: x + -0.0 is x for every x
        return bool(value == 0) and (not dtype.is_floating or bool(np.signbit(value)))
    if name == "stablehlo.multiply":
        return bool(value == 1)
    if name in ("stablehlo.maximum", "stablehlo.minimum"):
        low = name == "stablehlo.maximum"
        if dtype.is_floating:
            return bool(value == (-np.inf if low else np.inf))
        return dtype.is_integer and int(value) == (dtype.min if low else dtype.max)
    if name in ("stablehlo.or", "stablehlo.xor"):
        return not np.asarray(value).any()
    return bool(np.all(~np.asarray(value) == 0))  # and: all ones


def _broadcast_like(init, reduced):
    return tf.broadcast_to(init, tf.shape(reduced))


def _reduced_size(x, dims):
    sizes = tf.shape(x, out_type=tf.int64)
    return tf.reduce_prod(tf.gather(sizes, dims)) if dims else tf.constant(1, tf.int64)


def _init_if_empty(x, dims, init, result):
    """An empty reduction is the init value exactly (TF's reduce ops start from their own
    identity, which `body(init, identity)` need not turn back into the init)."""
    static = x.shape.as_list() if x.shape.rank is not None else None
    if static is not None and all(static[d] is not None for d in dims):
        if all(static[d] != 0 for d in dims):
            return result
    empty = tf.equal(_reduced_size(x, dims), 0)
    return tf.where(empty, _broadcast_like(init, result), result)


def monoid_reduce(name: str, x: tf.Tensor, dims: list[int]) -> tf.Tensor:
    """`x` reduced over `dims` by the StableHLO op `name` (without the init value)."""
    dtype = x.dtype
    if dtype == tf.bool:
        if name in ("stablehlo.add", "stablehlo.maximum", "stablehlo.or"):
            return tf.reduce_any(x, dims)
        if name in ("stablehlo.multiply", "stablehlo.minimum", "stablehlo.and"):
            return tf.reduce_all(x, dims)
        parity = tf.math.floormod(tf.reduce_sum(tf.cast(x, tf.int64), dims), 2)
        return tf.equal(parity, 1)
    if name in ("stablehlo.add", "stablehlo.multiply"):
        fn = tf.reduce_sum if name == "stablehlo.add" else tf.reduce_prod
        compute = ds.float_compute_type(dtype)
        return tf.cast(fn(tf.cast(x, compute), dims), dtype)
    if name in ("stablehlo.maximum", "stablehlo.minimum"):
        fn = tf.reduce_max if name == "stablehlo.maximum" else tf.reduce_min
        if dtype not in ds.FLOATS:
            return fn(x, dims)
        nan = tf.math.is_nan(x)
        result = fn(tf.where(nan, tf.zeros_like(x), x), dims)
        # TF's reduce max/min return either zero where -0.0 and +0.0 tie: the max is +0.0
        # if any element is (bits 0), the min -0.0 if any element is (bits INT_MIN).
        signed = tf.bitcast(x, _SAME_WIDTH_INT[dtype])
        zero_bits = 0 if name == "stablehlo.maximum" else signed.dtype.min
        has_zero = tf.reduce_any(tf.equal(signed, tf.constant(zero_bits, signed.dtype)), dims)
        zero = ds.scalar(-0.0 if name == "stablehlo.minimum" else 0.0, dtype)
        result = tf.where(tf.logical_and(has_zero, tf.equal(result, 0)), zero, result)
        return tf.where(tf.reduce_any(nan, dims), tf.constant(np.nan, dtype), result)
    return _bitwise_reduce(name, x, dims)


def _bitwise_reduce(name, x, dims):
    """and/or/xor over `dims`, bit by bit: each bit plane reduced by all/any/parity."""
    width = ds.bits(x.dtype)
    u = ds.as_unsigned(x)
    wide = tf.uint64 if width == 64 else tf.uint32  # shifts and sums of every width
    shifts = tf.range(width, dtype=tf.int64 if width == 64 else tf.int32)
    shifts = tf.cast(shifts, wide)
    planes = tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(tf.expand_dims(tf.cast(u, wide), -1), shifts),
        tf.ones([width], wide))  # x.shape + [width], each 0 or 1
    set_bits = tf.not_equal(planes, tf.zeros([], wide))
    if name == "stablehlo.and":
        reduced = tf.reduce_all(set_bits, dims)
    elif name == "stablehlo.or":
        reduced = tf.reduce_any(set_bits, dims)
    else:
        count = tf.reduce_sum(tf.cast(set_bits, tf.int64), dims)
        reduced = tf.equal(tf.math.floormod(count, 2), 1)
    word = tf.reduce_sum(tf.bitwise.left_shift(tf.cast(reduced, wide), shifts), -1)
    return ds.bitcast_back(tf.cast(word, u.dtype), x.dtype)


def _arg_reduce(direction, operands, inits, dims):
    """JAX's argmax (GT) / argmin (LT) body over (values, indices): the first NaN in iteration
    order wins; else the max (min) value, ties to the lowest index."""
    values, indices = operands
    init_value, init_index = inits
    rank = values.shape.rank
    kept = [d for d in range(rank) if d not in dims]
    # Reduced dimensions last and flattened: positions count in XLA's row-major order.
    order = kept + list(dims)
    v = tf.transpose(values, order) if order != list(range(rank)) else values
    i = tf.transpose(indices, order) if order != list(range(rank)) else indices
    out_shape = tf.shape(v)[:len(kept)]
    flat_shape = tf.concat([out_shape, [-1]], 0)
    v = tf.reshape(v, flat_shape)
    i = tf.reshape(i, flat_shape)
    is_float = values.dtype in ds.FLOATS
    best_fn = tf.reduce_max if direction == "GT" else tf.reduce_min
    if values.dtype == tf.bool:
        vk = tf.cast(v, tf.int8)
        best = tf.cast(best_fn(vk, -1), tf.bool)
        at_best = tf.equal(vk, tf.expand_dims(tf.cast(best, tf.int8), -1))
    else:
        nan = tf.math.is_nan(v) if is_float else None
        finite_v = tf.where(nan, tf.zeros_like(v), v) if is_float else v
        best = best_fn(finite_v, -1)
        at_best = tf.equal(v, tf.expand_dims(best, -1))
    big = tf.constant(i.dtype.max, i.dtype)
    index = tf.reduce_min(tf.where(at_best, i, tf.fill(tf.shape(i), big)), -1)
    value = best
    if is_float:
        any_nan = tf.reduce_any(nan, -1)
        shape = tf.shape(v, out_type=tf.int64)
        positions = tf.broadcast_to(tf.range(shape[-1], dtype=tf.int64), shape)
        past_end = tf.fill(shape, shape[-1])
        first_nan = tf.reduce_min(tf.where(nan, positions, past_end), -1)
        first_nan = tf.where(any_nan, first_nan, tf.zeros_like(first_nan))  # in range to gather
        batch = len(kept)
        nan_value = tf.gather(v, tf.expand_dims(first_nan, -1), batch_dims=batch, axis=batch)
        nan_index = tf.gather(i, tf.expand_dims(first_nan, -1), batch_dims=batch, axis=batch)
        value = tf.where(any_nan, tf.squeeze(nan_value, -1), value)
        index = tf.where(any_nan, tf.squeeze(nan_index, -1), index)
    # The init value goes first: body(init, reduction), with the body's own pick rule.
    a_v = tf.broadcast_to(init_value, tf.shape(value))
    a_i = tf.broadcast_to(init_index, tf.shape(index))
    if values.dtype == tf.bool:
        ak, bk = tf.cast(a_v, tf.int8), tf.cast(value, tf.int8)
        better = ak > bk if direction == "GT" else ak < bk
        same = tf.equal(ak, bk)
        pick = better
    else:
        better = a_v > value if direction == "GT" else a_v < value
        pick = tf.logical_or(better, tf.math.is_nan(a_v)) if is_float else better
        same = tf.equal(a_v, value)
    result_value = tf.where(pick, a_v, value)
    pick_index = tf.logical_or(pick, tf.logical_and(same, a_i < index))
    result_index = tf.where(pick_index, a_i, index)
    result_value = _init_if_empty(values, dims, init_value, result_value)
    result_index = _init_if_empty(values, dims, init_index, result_index)
    return [result_value, result_index]
