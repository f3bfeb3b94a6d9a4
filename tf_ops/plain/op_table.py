"""The op table of the plain-TF-ops lowering: one row per StableHLO / CHLO / func op (and per
custom call target) holding everything about it: the function that builds its TF ops, the
conversion-time check that refuses what it cannot lower exactly, what its inputs arrive as,
and the roles the other lowerings read (elementwise in a body, reduction combiner, sort key).
An op missing here is refused at conversion (`interpreter.check_program`). Each family of ops
has its own module; this table is the one place that lists them, and the rows' roles reach
the families through `op_rows`. Every row has examples in tests/tf_ops/plain/op_examples.py
pinning the TF op types it becomes.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from tf_ops.plain import (
    bitwise,
    contractions,
    control_flow,
    conversions,
    fft,
    indexing,
    lapack_kernels,
    linalg_ops,
    op_rows,
    random_bits,
    reductions,
    scatter,
    select_and_scatter,
    shapes,
    sorting,
    windows,
)
from tf_ops.plain import elementwise as ew
from tf_ops.plain import raised_ops as raised
from tf_ops.plain import special_functions as special

# What a lowering's `emit` receives as inputs (see symbolic.py):
TENSORS = "tensors"            # tensors: symbolic values are materialized first
BROADCASTING = "broadcasting"  # elementwise ops whose TF ops broadcast: scalars and aligned
                               # sources in place of broadcasts (symbolic.broadcastable)
SYMBOLIC = "symbolic"          # the values as they are (symbolic ones included)


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One op: how it becomes TF ops, and what the other lowerings may know about it.

    Attributes:
      emit: `emit(ctx, op, *inputs)` builds the op's TF ops; returns its result(s).
      check: `check(op)` says why the op cannot be lowered exactly (refused at conversion),
        or None when it can; None: always can.
      operands: what `emit` receives: TENSORS, BROADCASTING or SYMBOLIC (symbolic.py).
      elementwise: each result element comes from the same elements of the operands, so a
        body of such ops (windows, scatters, comparators) runs on whole tensors.
      combiner: as a body `op(acc, x)`, the reduction it is: "add", "multiply", "max", "min",
        "and", "or" or "xor" (reduce, reduce_window and scatter bodies); else None.
      idempotent: op(a, a) == a: a fold over overlapping windows may regroup it.
      sort_key: a sort comparator may apply it to build a key.
      tokens: its operands or results may be tokens or other non-tensor types.
    """
    emit: Callable
    check: Callable | None = None
    operands: str = TENSORS
    elementwise: bool = False
    combiner: str | None = None
    idempotent: bool = False
    sort_key: bool = False
    tokens: bool = False


def _ew(emit, check=None, operands=TENSORS, **roles) -> Lowering:
    """An elementwise op's row."""
    return Lowering(emit, check, operands, elementwise=True, **roles)


def _binary(emit, check=None, **roles) -> Lowering:
    """An elementwise binary op whose TF op broadcasts its operands."""
    return _ew(emit, check, BROADCASTING, **roles)


OP_TABLE: dict[str, Lowering] = {
    # elementwise (elementwise.py)
    "stablehlo.add": _binary(ew.add, combiner="add"),
    "stablehlo.subtract": _binary(ew.subtract),
    "stablehlo.multiply": _binary(ew.multiply, combiner="multiply"),
    "stablehlo.divide": _binary(ew.divide),
    "stablehlo.remainder": _ew(ew.remainder, ew.check_real),
    "stablehlo.maximum": _binary(ew.maximum, ew.check_minmax, combiner="max",
                                 idempotent=True),
    "stablehlo.minimum": _binary(ew.minimum, ew.check_minmax, combiner="min",
                                 idempotent=True),
    "stablehlo.power": _binary(ew.power),
    "stablehlo.atan2": _ew(ew.atan2, ew.check_real),
    # bitwise and shifts (bitwise.py)
    "stablehlo.and": _binary(bitwise.bitwise_and, combiner="and", idempotent=True,
                             sort_key=True),
    "stablehlo.or": _binary(bitwise.bitwise_or, combiner="or", idempotent=True, sort_key=True),
    "stablehlo.xor": _binary(bitwise.bitwise_xor, combiner="xor"),
    "stablehlo.not": _ew(bitwise.bitwise_not, sort_key=True),
    "stablehlo.shift_left": _ew(bitwise.shift_left),
    "stablehlo.shift_right_logical": _ew(bitwise.shift_right_logical),
    "stablehlo.shift_right_arithmetic": _ew(bitwise.shift_right_arithmetic),
    "stablehlo.popcnt": _ew(bitwise.popcnt),
    "stablehlo.count_leading_zeros": _ew(bitwise.count_leading_zeros),
    "stablehlo.negate": _ew(ew.negate, sort_key=True),
    "stablehlo.abs": _ew(ew.abs_, sort_key=True),
    "stablehlo.sign": _ew(ew.sign),
    "stablehlo.exponential": _ew(ew.exponential),
    "stablehlo.exponential_minus_one": _ew(ew.exponential_minus_one),
    "stablehlo.log": _ew(ew.log),
    "stablehlo.log_plus_one": _ew(ew.log_plus_one),
    "stablehlo.logistic": _ew(ew.logistic),
    "stablehlo.sqrt": _ew(ew.sqrt),
    "stablehlo.rsqrt": _ew(ew.rsqrt),
    "stablehlo.cbrt": _ew(ew.cbrt, ew.check_real),
    "stablehlo.tanh": _ew(ew.tanh),
    "stablehlo.sine": _ew(ew.sine),
    "stablehlo.cosine": _ew(ew.cosine),
    "stablehlo.tan": _ew(ew.tan),
    "stablehlo.floor": _ew(ew.floor),
    "stablehlo.ceil": _ew(ew.ceil),
    "stablehlo.round_nearest_even": _ew(ew.round_nearest_even),
    "stablehlo.round_nearest_afz": _ew(ew.round_nearest_afz),
    "stablehlo.is_finite": _ew(ew.is_finite),
    "stablehlo.real": _ew(ew.real, sort_key=True),
    "stablehlo.imag": _ew(ew.imag, sort_key=True),
    "stablehlo.complex": _ew(ew.complex_),
    "stablehlo.compare": _binary(ew.compare, ew.check_compare, sort_key=True),
    "stablehlo.select": _binary(ew.select, sort_key=True),
    "stablehlo.clamp": _ew(ew.clamp, ew.check_minmax),
    # conversions (conversions.py)
    "stablehlo.convert": _ew(conversions.convert, sort_key=True),
    "stablehlo.bitcast_convert": Lowering(conversions.bitcast_convert,
                                          conversions.check_bitcast, sort_key=True),
    "stablehlo.reduce_precision": _ew(conversions.reduce_precision),
    # special functions (special_functions.py)
    "stablehlo.composite": Lowering(special.composite, special.check_composite),
    # shapes (shapes.py)
    "stablehlo.constant": Lowering(shapes.constant, operands=SYMBOLIC, elementwise=True,
                                    sort_key=True),
    "stablehlo.iota": Lowering(shapes.iota),
    "stablehlo.dynamic_iota": Lowering(shapes.dynamic_iota, operands=SYMBOLIC),
    "stablehlo.broadcast_in_dim": Lowering(shapes.broadcast_in_dim, operands=SYMBOLIC),
    "stablehlo.dynamic_broadcast_in_dim": Lowering(shapes.dynamic_broadcast_in_dim, operands=SYMBOLIC),
    "stablehlo.reshape": Lowering(shapes.reshape, operands=SYMBOLIC),
    "stablehlo.dynamic_reshape": Lowering(shapes.dynamic_reshape, operands=SYMBOLIC),
    "stablehlo.transpose": Lowering(shapes.transpose),
    "stablehlo.slice": Lowering(shapes.slice_),
    "stablehlo.real_dynamic_slice": Lowering(shapes.real_dynamic_slice),
    "stablehlo.concatenate": Lowering(shapes.concatenate),
    "stablehlo.reverse": Lowering(shapes.reverse),
    "stablehlo.get_dimension_size": Lowering(shapes.get_dimension_size, operands=SYMBOLIC),
    "stablehlo.pad": Lowering(shapes.pad),
    "stablehlo.dynamic_pad": Lowering(shapes.dynamic_pad),
    "stablehlo.optimization_barrier": Lowering(shapes.optimization_barrier, tokens=True),
    # indexing: gather and dynamic slices (indexing.py), scatter (scatter.py)
    "stablehlo.gather": Lowering(indexing.gather),
    "stablehlo.dynamic_gather": Lowering(indexing.dynamic_gather),
    "stablehlo.scatter": Lowering(scatter.scatter, scatter.check_scatter),
    "stablehlo.dynamic_slice": Lowering(indexing.dynamic_slice),
    "stablehlo.dynamic_update_slice": Lowering(indexing.dynamic_update_slice),
    # reductions (reductions.py)
    "stablehlo.reduce": Lowering(reductions.reduce, reductions.check_reduce),
    # windows: reduce_window (windows.py, windows_cumulative.py), select_and_scatter
    # (select_and_scatter.py), both on the windowed view (windowed_view.py)
    "stablehlo.reduce_window": Lowering(windows.reduce_window, windows.check_reduce_window),
    "stablehlo.select_and_scatter": Lowering(select_and_scatter.select_and_scatter,
                                             select_and_scatter.check_select_and_scatter),
    # contractions: dot_general, convolution (contractions.py)
    "stablehlo.dot_general": Lowering(contractions.dot_general, contractions.check_dot_general),
    "stablehlo.dot": Lowering(contractions.dot, contractions.check_dot_general),
    "stablehlo.convolution": Lowering(contractions.convolution,
                                      contractions.check_convolution),
    "stablehlo.dynamic_conv": Lowering(contractions.dynamic_conv,
                                       contractions.check_convolution),
    # sorting: sort, top_k (sorting.py)
    "stablehlo.sort": Lowering(sorting.sort, sorting.check_sort),
    "chlo.top_k": Lowering(sorting.top_k, sorting.check_top_k),
    # random bits, fft, linear algebra (random_bits.py, fft.py, linalg_ops.py)
    "stablehlo.rng_bit_generator": Lowering(random_bits.rng_bit_generator,
                                            random_bits.check_rng_bit_generator),
    "stablehlo.rng": Lowering(random_bits.rng, random_bits.check_rng),
    "stablehlo.fft": Lowering(fft.fft, fft.check_fft),
    "stablehlo.triangular_solve": Lowering(linalg_ops.triangular_solve,
                                           linalg_ops.check_triangular_solve),
    "stablehlo.cholesky": Lowering(linalg_ops.cholesky, linalg_ops.check_cholesky),
    # control flow and calls (control_flow.py)
    "func.call": Lowering(control_flow.call, operands=SYMBOLIC),
    "stablehlo.while": Lowering(control_flow.while_, control_flow.check_while),
    "stablehlo.case": Lowering(control_flow.case),
    "stablehlo.if": Lowering(control_flow.if_),
    "stablehlo.custom_call": Lowering(control_flow.custom_call, control_flow.check_custom_call,
                                      operands=SYMBOLIC, tokens=True),
    # raised: JAX's decompositions of one TF op, put back by tf_ops/plain/rewrite
    "raised.unary": Lowering(raised.unary),
    "raised.gelu": Lowering(raised.gelu),
    "raised.relu": Lowering(raised.relu),
    "raised.relu6": Lowering(raised.relu6),
    "raised.sigmoid": Lowering(raised.sigmoid),
    "raised.softmax": Lowering(raised.softmax),
    "raised.log_softmax": Lowering(raised.log_softmax),
    "raised.mean": Lowering(raised.mean),
    "raised.avg_pool": Lowering(raised.avg_pool),
}

# Custom call targets (`stablehlo.custom_call`'s row dispatches on them); anything else is a
# kernel outside StableHLO that only XLA provides, refused at conversion.
CUSTOM_CALLS: dict[str, Lowering] = {
    # JAX's check of the dimension variables: at trace time only (control_flow.py says why)
    control_flow.SHAPE_ASSERTION: Lowering(control_flow.shape_assertion, operands=SYMBOLIC,
                                           tokens=True),
    # single-device modules mark values with their sharding: the value itself
    "Sharding": Lowering(control_flow.identity_call),
    # reduce_window with a symbolic size (its body is the called function)
    "stablehlo.dynamic_reduce_window": Lowering(windows.dynamic_reduce_window,
                                                windows.check_dynamic_reduce_window),
    # XLA's Householder kernels, which the portable QR writes (linalg_ops.py)
    **{target: Lowering(emit, check) for target, (emit, check) in linalg_ops.CUSTOM_CALLS.items()},
    # jaxlib's LAPACK calls that TF has kernels for (lapack_kernels.py; CPU exports for
    # enable_xla=False keep them, jax2tf_native.linalg.plain_rules)
    **{target: Lowering(emit, check)
       for target, (emit, check) in lapack_kernels.CUSTOM_CALLS.items()},
}

op_rows.register(OP_TABLE, CUSTOM_CALLS)
