"""Runs a `Program` as ordinary TF ops: each StableHLO op becomes the TF ops its lowering builds.

`check_program` runs at conversion and refuses, with `PlainLoweringError`, every op that has no
exact lowering (before any TF op is built); `run_program` then builds the ops eagerly or in the
current graph. Symbolic dimensions are never baked in: lowerings read them with `tf.shape` at
run time (`Context.dims`), so a graph traced with a `None` batch serves every batch size.
"""
from __future__ import annotations

import collections
from typing import Sequence

import tensorflow as tf

from tf_ops.plain import dim_arithmetic, op_table, symbolic
from tf_ops.plain.errors import PlainLoweringError, unsupported
from tf_ops.plain.program import Op, Program, Region

# Element types TF holds but has no arithmetic kernels for: refused wherever they appear.
# (f4/f6/f8 followed by "E": "f6" alone would also match "f64".)
_NO_TF_ARITHMETIC = ("f8E", "i4", "ui4", "i2", "ui2", "f4E", "f6E")


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
            if t.dtype is None and op.name not in op_table.TOKEN_OPS:
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

    def call(self, name: str, args: list[tf.Tensor]) -> list[tf.Tensor]:
        function = self.program.functions[name]
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
        if entry.operands != op_table.SYMBOLIC:
            folded = dim_arithmetic.fold(op, inputs)
            if folded is not None:
                return [symbolic.materialize(v) for v in folded] if tensors else folded
            if entry.operands == op_table.BROADCASTING:
                inputs = symbolic.broadcastable(inputs)
            else:
                inputs = [symbolic.materialize(v) for v in inputs]
        outputs = entry.emit(self, op, *inputs)
        if isinstance(outputs, (tf.Tensor, tf.Variable)) or not isinstance(outputs,
                                                                          (list, tuple)):
            outputs = [outputs]
        outputs = list(outputs)
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

    def value(self, value_id: int) -> tf.Tensor:
        """A value visible where the current op runs, e.g. one a comparator captures from
        around it (lowerings that evaluate a region's ops themselves read captures here)."""
        return symbolic.materialize(self._scope[value_id])

    def dims(self, x: tf.Tensor) -> list:
        """The sizes of `x`'s dimensions: Python ints where static, int32 scalars otherwise
        (one `tf.shape` per tensor)."""
        return self.shapes.tensors(x)
