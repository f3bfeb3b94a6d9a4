"""Runs a `Program` as ordinary TF ops: each StableHLO op becomes the TF ops its lowering builds.

`check_program` runs at conversion and refuses, with `PlainLoweringError`, every op that has no
exact lowering (before any TF op is built); `run_program` then builds the ops eagerly or in the
current graph. Symbolic dimensions are never baked in: lowerings read them with `tf.shape` at
run time (`Context.dims`), so a graph traced with a `None` batch serves every batch size.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from tf_ops.plain import dim_arithmetic, folding, op_sources, op_table, symbolic
from tf_ops.plain.errors import PlainLoweringError, unsupported
from tf_ops.plain.program import Op, Program, Region

# Elementwise ops XLA's CPU backend computes in float32 when they are bfloat16 (float
# normalization), so that a following convert to float32 takes the unrounded value. Data
# movement (reshape, transpose, select, slices) runs on the bfloat16 bits.
_BF16_COMPUTED_IN_F32 = frozenset("stablehlo." + name for name in (
    "add subtract multiply divide remainder maximum minimum power atan2 negate abs sign "
    "exponential exponential_minus_one log log_plus_one logistic sqrt rsqrt cbrt tanh sine "
    "cosine tan floor ceil round_nearest_even round_nearest_afz clamp").split())

# Ops whose result holds the same scalar as their first operand (a float convert rounds it).
_SPLAT_KEEPING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim",
                            "stablehlo.reshape", "stablehlo.dynamic_reshape",
                            "stablehlo.convert"})

# Element types TF holds but has no arithmetic kernels for: refused wherever they appear.
# (f4/f6/f8 followed by "E": "f6" alone would also match "f64".)
_NO_TF_ARITHMETIC = ("f8E", "i4", "ui4", "i2", "ui2", "f4E", "f6E")


def _is_float(dtype: np.dtype) -> bool:
    return tf.as_dtype(dtype).is_floating


def check_program(program: Program) -> None:
    """Raises `PlainLoweringError` for the first op that cannot be lowered exactly.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from tf_ops.plain.program import read_program
        >>> exp = jax.export.export(jax.jit(jnp.tanh))(jax.ShapeDtypeStruct((2,), "float32"))
        >>> check_program(read_program(exp.mlir_module()))  # no error: tanh lowers
    """
    for op in program.ops():
        entry = op_table.OP_TABLE.get(op.name)
        if entry is None:
            raise unsupported(op, "this op has no plain-TF lowering yet")
        for t in op.operand_types + op.result_types:
            if t.dtype is None and not entry.tokens:
                raise unsupported(op, f"element type {t.element} has no TF tensor type")
            if t.element.startswith(_NO_TF_ARITHMETIC):
                raise unsupported(op, f"TF has no arithmetic kernels for {t.element}")
        if entry.check is not None:
            why = entry.check(op)
            if why:
                raise unsupported(op, why)


def run_program(program: Program, args: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Builds (in a graph) or runs (eagerly) `program`'s main on `args` as plain TF ops."""
    outputs = Context(program).call(program.main, list(args))
    return [symbolic.materialize(v) for v in outputs]


class Context:
    """What a lowering may ask for besides its op and inputs: nested regions, function calls,
    and run-time dimension sizes."""

    def __init__(self, program: Program):
        self.program = program
        self.shapes = symbolic.ShapeCache()
        # Values visible to the region being built: a case branch or loop body may use values
        # defined around it (StableHLO regions capture them), so scopes chain outwards.
        self._scope = collections.ChainMap()
        # Values that hold one repeated constant (`splat`), by value id.
        self._splats: dict[int, np.ndarray] = {}
        # bfloat16 results: the op and inputs that made them, and float32 values before
        # rounding (`unrounded`).
        self._bf16_producers: dict[int, tuple[Op, list[tf.Tensor]]] = {}
        self._unrounded: dict[int, tf.Tensor] = {}

    def call(self, name: str, args: list[tf.Tensor], splats: Sequence | None = None
             ) -> list[tf.Tensor]:
        """Runs function `name` on `args`; `splats` are the arguments' constant scalars (XLA
        inlines calls before simplifying, so a constant argument folds as a constant)."""
        function = self.program.functions[name]
        for arg, value in zip(function.body.args, splats or [None] * len(args)):
            if value is None:
                self._splats.pop(arg, None)
            else:
                self._splats[arg] = value
        outer, self._scope = self._scope, collections.ChainMap()  # functions capture nothing
        try:
            return self.region(function.body, args, tensors=False)
        finally:
            self._scope = outer

    def region(self, region: Region, args: Sequence, tensors: bool = True) -> list:
        """Runs a block on `args`; returns the values its terminator returns (as tensors, or
        with `tensors=False` as they are, symbolic ones included)."""
        if len(args) != len(region.args):
            raise PlainLoweringError(f"a block takes {len(region.args)} values, got {len(args)}")
        env = self._scope.new_child(dict(zip(region.args, args)))
        outer, self._scope = self._scope, env
        try:
            for op in region.ops:
                inputs = [env[v] for v in op.operands]
                outputs = self.emit(op, inputs, tensors=False)
                env.maps[0].update(zip(op.results, outputs))
            returns = [env[v] for v in region.returns]
            return [symbolic.materialize(v) for v in returns] if tensors else returns
        finally:
            self._scope = outer

    def emit(self, op: Op, inputs: list, tensors: bool = True) -> list:
        """Lowers one op; `inputs` may hold symbolic values (symbolic.py), and so may the
        results with `tensors=False`."""
        entry = op_table.OP_TABLE[op.name]
        full = None
        if entry.operands != op_table.SYMBOLIC:
            folded = dim_arithmetic.fold(op, inputs)
            if folded is not None:
                return [symbolic.materialize(v) for v in folded] if tensors else folded
            folded = folding.fold(self, entry, op, inputs)
            if folded is not None:
                return [symbolic.materialize(v) for v in folded] if tensors else folded
            symbolic_inputs = inputs
            if entry.operands == op_table.BROADCASTING:
                full = next((v for v in inputs if not symbolic.is_symbolic(v)), None)
                inputs = symbolic.broadcastable(inputs)
                if full is None:  # the symbolic operand `broadcastable` built in full
                    full = next((new for old, new in zip(symbolic_inputs, inputs)
                                 if symbolic.is_materialized(old, new)), None)
            else:
                inputs = [symbolic.materialize(v) for v in inputs]
        sources = op_sources.active()
        if sources is not None and not tf.executing_eagerly():
            graph = tf.compat.v1.get_default_graph()
            start = graph.version
            outputs = entry.emit(self, op, *inputs)
            sources.note(graph, start, graph.version, op.source)
        else:
            outputs = entry.emit(self, op, *inputs)
        if (entry.operands == op_table.BROADCASTING and full is None
                and any(isinstance(v, symbolic.Broadcast) for v in symbolic_inputs)):
            outputs = [symbolic.broadcast_result(symbolic_inputs, o)
                       for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
        elif entry.operands == op_table.BROADCASTING and full is not None:
            # A lowering may return an operand as it is (`x * 1 -> x`): a scalar or an
            # aligned broadcast source (size-1 dimensions) stands for the whole shape.
            outputs = [tf.broadcast_to(o, tf.shape(full)) if _partial(o, full) else o
                       for o in (outputs if isinstance(outputs, (list, tuple))
                                 else [outputs])]
        if isinstance(outputs, (tf.Tensor, tf.Variable)) or not isinstance(outputs,
                                                                          (list, tuple)):
            outputs = [outputs]
        outputs = list(outputs)
        self._note_splat(op)
        if op.result_types and op.result_types[0].element == "bf16":
            self._bf16_producers[op.results[0]] = (op, inputs)
        if len(outputs) != len(op.results):
            raise PlainLoweringError(f"lowering of {op.name} gave {len(outputs)} results for "
                                     f"{len(op.results)}")
        if not tf.executing_eagerly():
            for output, result_type in zip(outputs, op.result_types):
                if symbolic.is_symbolic(output):
                    continue
                if result_type.dtype is not None and output.shape.rank is None:
                    output.set_shape([None] * result_type.rank)
                if result_type.dtype is not None and not result_type.is_static:
                    continue
                if result_type.dtype is not None:
                    output.set_shape(result_type.shape)
        return [symbolic.materialize(v) for v in outputs] if tensors else outputs

    def splat(self, value_id: int) -> np.ndarray | None:
        """The scalar (0-d numpy array) that every element of value `value_id` holds, if it is a
        constant, or a broadcast, reshape or float convert of one; else None.

        XLA's algebraic simplifier folds arithmetic with such values (`x + 0 -> x`, `x * 1 ->
        x`, `-0 - x -> -x`); lowerings ask for them to do the same, and to leave out edge-case
        fixes that a constant operand rules out (max with a non-zero constant cannot tie at 0).
        """
        value = self._scope.get(value_id)
        if isinstance(value, symbolic.Splat):
            return np.asarray(value.value).reshape(())
        return self._splats.get(value_id)

    def keep_unrounded(self, value_id: int, make: Callable[[], tf.Tensor]) -> None:
        """Records how to get the float32 value a bfloat16 result was rounded from (a
        contraction's), built only if a convert asks for it."""
        self._unrounded[value_id] = make

    def unrounded(self, value_id: int) -> tf.Tensor | None:
        """The float32 value XLA's CPU backend gives `convert(v, f32)` for the bfloat16 value
        `value_id`, if it is not v itself: XLA computes bfloat16 arithmetic (elementwise ops,
        dots, convolutions) in float32 and rounds the result, and a convert to float32 right
        after takes the value before that rounding (measured on jax 0.10.2: conv -> astype(f32)
        is the unrounded conv; through a reshape, transpose or select it is rounded). Other
        users of the result see it rounded. None where the convert takes v as it is."""
        if value_id in self._unrounded:
            if callable(self._unrounded[value_id]):
                self._unrounded[value_id] = self._unrounded[value_id]()
            return self._unrounded[value_id]
        op, inputs = self._bf16_producers.get(value_id, (None, None))
        if op is None or op.name not in _BF16_COMPUTED_IN_F32 or len(op.results) != 1:
            return None
        wide_inputs = [tf.cast(x, tf.float32) if x.dtype == tf.bfloat16 else x for x in inputs]
        wide_op = dataclasses.replace(op, result_types=tuple(
            dataclasses.replace(t, element="f32", dtype=np.dtype(np.float32))
            for t in op.result_types))
        value = op_table.OP_TABLE[op.name].emit(self, wide_op, *wide_inputs)
        value = value[0] if isinstance(value, (list, tuple)) else value
        self._unrounded[value_id] = value
        return value

    def _note_splat(self, op: Op) -> None:
        if op.name == "stablehlo.constant":
            value = np.asarray(op.attr("value"))
            if value.size:
                flat = value.reshape(-1)
                rows = flat.view(np.uint8).reshape(flat.size, -1)
                if (rows == rows[0]).all():  # equal bits: -0.0 and NaNs count as themselves
                    self._splats[op.results[0]] = flat[0].copy().reshape(())
        elif op.name in _SPLAT_KEEPING and op.operands and op.operands[0] in self._splats:
            value = self._splats[op.operands[0]]
            if op.name == "stablehlo.convert":
                to = op.result_types[0].dtype
                if not (_is_float(value.dtype) and to is not None and _is_float(to)):
                    return  # only float -> float: numpy rounds to nearest even as XLA does
                value = value.astype(to)
            self._splats[op.results[0]] = value

    def value(self, value_id: int) -> tf.Tensor:
        """A value visible where the current op runs, e.g. one a comparator captures from
        around it (lowerings that evaluate a region's ops themselves read captures here)."""
        return symbolic.materialize(self._scope[value_id])

    def dims(self, x: tf.Tensor) -> list:
        """The sizes of `x`'s dimensions: Python ints where static, int32 scalars otherwise
        (one `tf.shape` per tensor)."""
        return self.shapes.tensors(x)


def _partial(output, full: tf.Tensor) -> bool:
    """Whether `output` of a broadcasting op has fewer elements than its operand `full`
    (fewer dimensions, or a size-1 dimension where `full`'s is another or unknown)."""
    if not isinstance(output, tf.Tensor) or output.shape.rank is None \
            or full.shape.rank is None:
        return False
    if output.shape.rank < full.shape.rank:
        return True
    return any(o == 1 and f != 1 for o, f in zip(output.shape.as_list(),
                                                  full.shape.as_list()))
