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

from tf_ops.plain import op_sources, op_table
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
    return Context(program).call(program.main, list(args))


class Context:
    """What a lowering may ask for besides its op and inputs: nested regions, function calls,
    and run-time dimension sizes."""

    def __init__(self, program: Program):
        self.program = program
        # Values visible to the region being built: a case branch or loop body may use values
        # defined around it (StableHLO regions capture them), so scopes chain outwards.
        self._scope = collections.ChainMap()

    def call(self, name: str, args: list[tf.Tensor]) -> list[tf.Tensor]:
        function = self.program.functions[name]
        outer, self._scope = self._scope, collections.ChainMap()  # functions capture nothing
        try:
            return self.region(function.body, args)
        finally:
            self._scope = outer

    def region(self, region: Region, args: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """Runs a block on `args`; returns the values its terminator returns."""
        if len(args) != len(region.args):
            raise PlainLoweringError(f"a block takes {len(region.args)} values, got {len(args)}")
        env = self._scope.new_child(dict(zip(region.args, args)))
        outer, self._scope = self._scope, env
        try:
            for op in region.ops:
                inputs = [env[v] for v in op.operands]
                outputs = self.emit(op, inputs)
                env.maps[0].update(zip(op.results, outputs))
            return [env[v] for v in region.returns]
        finally:
            self._scope = outer

    def emit(self, op: Op, inputs: list[tf.Tensor]) -> list[tf.Tensor]:
        entry = op_table.OP_TABLE[op.name]
        sources = op_sources.active()
        if sources is not None and not tf.executing_eagerly():
            graph = tf.compat.v1.get_default_graph()
            start = graph.version
            outputs = entry.emit(self, op, *inputs)
            sources.note(graph, start, graph.version, op.source)
        else:
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
                if result_type.dtype is not None and output.shape.rank is None:
                    output.set_shape([None] * result_type.rank)
                if result_type.dtype is not None and not result_type.is_static:
                    continue
                if result_type.dtype is not None:
                    output.set_shape(result_type.shape)
        return outputs

    def value(self, value_id: int) -> tf.Tensor:
        """A value visible where the current op runs, e.g. one a comparator captures from
        around it (lowerings that evaluate a region's ops themselves read captures here)."""
        return self._scope[value_id]

    @staticmethod
    def dims(x: tf.Tensor) -> list:
        """The sizes of `x`'s dimensions: Python ints where static, int32 scalars otherwise."""
        static = x.shape.as_list() if x.shape.rank is not None else None
        if static is not None and all(d is not None for d in static):
            return static
        dynamic = tf.shape(x, out_type=tf.int32)
        if static is None:
            return [dynamic[i] for i in range(int(tf.size(dynamic)))]
        return [d if d is not None else dynamic[i] for i, d in enumerate(static)]
