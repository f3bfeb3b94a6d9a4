"""The op table of the plain-TF-ops lowering: every StableHLO / CHLO / func op it lowers, the
function that builds its TF ops, and the conversion-time check that refuses what it cannot
lower exactly. An op missing here is refused at conversion (`interpreter.check_program`).

Each family of ops has its own module; this table is the one place that lists them all.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from tf_ops.plain import (contractions, control_flow, elementwise as ew, fft, indexing, linalg_ops,
                          raised_ops as raised, random_bits, reductions, shapes, sorting,
                          special_functions as special, windows)


# What a lowering's `emit` receives as inputs (see symbolic.py):
TENSORS = "tensors"            # tensors: symbolic values are materialized first
BROADCASTING = "broadcasting"  # elementwise ops whose TF ops broadcast: scalars and aligned
                               # sources in place of broadcasts (symbolic.broadcastable)
SYMBOLIC = "symbolic"          # the values as they are (symbolic ones included)


@dataclasses.dataclass(frozen=True)
class Lowering:
    """`emit(ctx, op, *inputs)` returns the result tensor(s); `check(op)` returns why the op
    cannot be lowered exactly (refused at conversion), or None; `operands` says what `emit`
    gets (TENSORS, BROADCASTING or SYMBOLIC)."""
    emit: Callable
    check: Callable | None = None
    operands: str = TENSORS


# Ops whose operands or results may be tokens or other non-tensor types.
TOKEN_OPS = frozenset({"stablehlo.custom_call", "stablehlo.optimization_barrier"})

OP_TABLE: dict[str, Lowering] = {
    # elementwise (elementwise.py)
    "stablehlo.add": Lowering(ew.add, None, BROADCASTING),
    "stablehlo.subtract": Lowering(ew.subtract, None, BROADCASTING),
    "stablehlo.multiply": Lowering(ew.multiply, None, BROADCASTING),
    "stablehlo.divide": Lowering(ew.divide, None, BROADCASTING),
    "stablehlo.remainder": Lowering(ew.remainder, ew.check_real),
    "stablehlo.maximum": Lowering(ew.maximum, ew.check_minmax, BROADCASTING),
    "stablehlo.minimum": Lowering(ew.minimum, ew.check_minmax, BROADCASTING),
    "stablehlo.power": Lowering(ew.power, None, BROADCASTING),
    "stablehlo.atan2": Lowering(ew.atan2, ew.check_real),
    "stablehlo.and": Lowering(ew.bitwise_and, None, BROADCASTING),
    "stablehlo.or": Lowering(ew.bitwise_or, None, BROADCASTING),
    "stablehlo.xor": Lowering(ew.bitwise_xor, None, BROADCASTING),
    "stablehlo.not": Lowering(ew.bitwise_not),
    "stablehlo.shift_left": Lowering(ew.shift_left),
    "stablehlo.shift_right_logical": Lowering(ew.shift_right_logical),
    "stablehlo.shift_right_arithmetic": Lowering(ew.shift_right_arithmetic),
    "stablehlo.popcnt": Lowering(ew.popcnt),
    "stablehlo.count_leading_zeros": Lowering(ew.count_leading_zeros),
    "stablehlo.negate": Lowering(ew.negate),
    "stablehlo.abs": Lowering(ew.abs_),
    "stablehlo.sign": Lowering(ew.sign),
    "stablehlo.exponential": Lowering(ew.exponential),
    "stablehlo.exponential_minus_one": Lowering(ew.exponential_minus_one),
    "stablehlo.log": Lowering(ew.log),
    "stablehlo.log_plus_one": Lowering(ew.log_plus_one),
    "stablehlo.logistic": Lowering(ew.logistic),
    "stablehlo.sqrt": Lowering(ew.sqrt),
    "stablehlo.rsqrt": Lowering(ew.rsqrt),
    "stablehlo.cbrt": Lowering(ew.cbrt, ew.check_real),
    "stablehlo.tanh": Lowering(ew.tanh),
    "stablehlo.sine": Lowering(ew.sine),
    "stablehlo.cosine": Lowering(ew.cosine),
    "stablehlo.tan": Lowering(ew.tan),
    "stablehlo.floor": Lowering(ew.floor),
    "stablehlo.ceil": Lowering(ew.ceil),
    "stablehlo.round_nearest_even": Lowering(ew.round_nearest_even),
    "stablehlo.round_nearest_afz": Lowering(ew.round_nearest_afz),
    "stablehlo.is_finite": Lowering(ew.is_finite),
    "stablehlo.real": Lowering(ew.real),
    "stablehlo.imag": Lowering(ew.imag),
    "stablehlo.complex": Lowering(ew.complex_),
    "stablehlo.compare": Lowering(ew.compare, ew.check_compare, BROADCASTING),
    "stablehlo.select": Lowering(ew.select, None, BROADCASTING),
    "stablehlo.clamp": Lowering(ew.clamp, ew.check_minmax),
    "stablehlo.convert": Lowering(ew.convert),
    "stablehlo.bitcast_convert": Lowering(ew.bitcast_convert, ew.check_bitcast),
    "stablehlo.reduce_precision": Lowering(ew.reduce_precision),
    # special functions (special_functions.py)
    "stablehlo.composite": Lowering(special.composite, special.check_composite),
    # shapes (shapes.py)
    "stablehlo.constant": Lowering(shapes.constant, operands=SYMBOLIC),
    "stablehlo.iota": Lowering(shapes.iota),
    "stablehlo.dynamic_iota": Lowering(shapes.dynamic_iota),
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
    "stablehlo.optimization_barrier": Lowering(shapes.optimization_barrier),
    # indexing: gather, scatter, dynamic slices (indexing.py)
    "stablehlo.gather": Lowering(indexing.gather),
    "stablehlo.dynamic_gather": Lowering(indexing.dynamic_gather),
    "stablehlo.scatter": Lowering(indexing.scatter, indexing.check_scatter),
    "stablehlo.dynamic_slice": Lowering(indexing.dynamic_slice),
    "stablehlo.dynamic_update_slice": Lowering(indexing.dynamic_update_slice),
    # reductions (reductions.py)
    "stablehlo.reduce": Lowering(reductions.reduce, reductions.check_reduce),
    # windows: reduce_window, select_and_scatter (windows.py)
    "stablehlo.reduce_window": Lowering(windows.reduce_window, windows.check_reduce_window),
    "stablehlo.select_and_scatter": Lowering(windows.select_and_scatter,
                                             windows.check_select_and_scatter),
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
                                      operands=SYMBOLIC),
    # raised: JAX's decompositions of one TF op, put back by tf_ops/plain/rewrite
    "raised.unary": Lowering(raised.unary),
    "raised.gelu": Lowering(raised.gelu),
    "raised.relu": Lowering(raised.relu),
    "raised.relu6": Lowering(raised.relu6),
    "raised.sigmoid": Lowering(raised.sigmoid),
    "raised.softmax": Lowering(raised.softmax),
    "raised.log_softmax": Lowering(raised.log_softmax),
    "raised.mean": Lowering(raised.mean),
}
