"""StableHLO -> ordinary TF ops (`enable_xla=False`): graphs that run without XLA.

The package's front door, for `tf_ops.xla_call_module`: `module_from_exported` reads an
exported module and checks it at conversion, so an op that cannot be lowered exactly fails
there (`PlainLoweringError`, naming op, dtype and source line), before any graph or file is
written; `PlainModule.call` then builds its ops in the current graph (eagerly it runs one
`tf.function` per input signature instead of re-emitting every op on every call).

Inside: the module is read into records (`program`), JAX's decompositions are raised back to
TF's own ops (`rewrite`), every op is checked (`interpreter.check_program`) and built as TF ops
(`interpreter.run_program`), one module per family of ops (elementwise, shapes, indexing,
reductions, windows, contractions, sorting, control flow, ...), listed in one table
(`op_table`).
"""
from __future__ import annotations

import threading
from typing import Sequence

import jax
import tensorflow as tf

from tf_ops.plain.errors import PlainLoweringError
from tf_ops.plain.interpreter import check_program, run_program
from tf_ops.plain.program import Program, read_program
from tf_ops.plain.rewrite import simplify


def prepare_program(module_text: str) -> Program:
    """A module's `Program` ready to run: read, JAX's decompositions raised back to TF's ops
    (`rewrite.simplify`), every op checked (`PlainLoweringError` for the first that cannot be
    lowered exactly).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> exp = jax.export.export(jax.jit(jax.nn.relu))(jax.ShapeDtypeStruct((2,), "float32"))
        >>> [op.name for op in prepare_program(exp.mlir_module()).ops()]
        ['func.call', 'raised.relu']
    """
    program = simplify(read_program(module_text))
    check_program(program)
    return program


_CALL_TF_TARGET = "tf.call_tf_function"
_CALL_TF_REFUSAL = (
    "it calls a TensorFlow function through jax2tf.call_tf(..., call_tf_graph=True) (custom "
    "call `tf.call_tf_function`, which only XlaCallModule runs). Fix: use call_tf without "
    "call_tf_graph=True, or convert with enable_xla=True")


class PlainModule:
    """A module's checked `Program` and the eager function that runs it.

    Example:
        >>> import jax.numpy as jnp
        >>> exp = jax.export.export(jax.jit(jnp.tanh))(jax.ShapeDtypeStruct((2,), "float32"))
        >>> module_from_exported(exp).call([tf.zeros(2)])[0].numpy()
        array([0., 0.], dtype=float32)
    """

    def __init__(self, program: Program, fun_name: str):
        self.program = program
        self.fun_name = fun_name
        self._lock = threading.Lock()
        self._eager: tf.types.experimental.PolymorphicFunction | None = None

    def call(self, kept: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """The module's outputs on the inputs it keeps: plain TF ops in the current graph, or
        eagerly the cached `tf.function` of them (traced once, and once more for inputs whose
        symbolic dimensions vary)."""
        if not tf.executing_eagerly():
            return run_program(self.program, list(kept))
        return list(self._eager_function()(*kept))

    def _eager_function(self):
        with self._lock:
            if self._eager is None:
                program = self.program

                def run(*xs):
                    return run_program(program, list(xs))

                run.__name__ = f"{self.fun_name}_plain"
                # reduce_retracing: eager calls at many batch sizes share a trace with `None`
                # there (only a module's symbolic dimensions can vary; they are read at run
                # time).
                self._eager = tf.function(run, autograph=False, reduce_retracing=True)
            return self._eager


def refusal(exported: jax.export.Exported, n_tf_functions: int) -> str | None:
    """Why `exported` as a whole cannot run as plain TF ops (before its ops are looked at)."""
    if exported.nr_devices > 1:
        return (f"it was exported for {exported.nr_devices} devices; plain TF ops have no "
                f"XLA SPMD partitioner to split it over them")
    if len(exported.platforms) > 1:
        return (f"it was lowered for several platforms {list(exported.platforms)} and picks one "
                f"at run time, which only XlaCallModule does. Fix: export for one platform, "
                f"e.g. platforms=('cpu',): the plain graph runs on every TF device")
    if n_tf_functions:
        return _CALL_TF_REFUSAL
    return None


def module_from_exported(exported: jax.export.Exported,
                        n_tf_functions: int = 0) -> PlainModule:
    """Reads `exported`'s module and checks that every op lowers exactly to plain TF ops.

    Raises:
      tf_ops.PlainLoweringError: the module, or one of its ops, cannot be lowered (the
        message names the op, its dtypes, the user's source line, why and the fix).
    """
    why = refusal(exported, n_tf_functions)
    if why is not None:
        raise PlainLoweringError(
            f"enable_xla=False cannot lower '{exported.fun_name}' to plain TensorFlow ops: "
            f"{why}.")
    program = read_program(exported.mlir_module())
    for op in program.ops():
        if op.name == "stablehlo.custom_call" and op.attr("call_target_name") == _CALL_TF_TARGET:
            raise PlainLoweringError(
                f"enable_xla=False cannot lower '{exported.fun_name}' to plain TensorFlow ops: "
                f"{_CALL_TF_REFUSAL}.")
    program = simplify(program)
    check_program(program)
    return PlainModule(program, exported.fun_name)


__all__ = ["PlainLoweringError", "PlainModule", "Program", "check_program", "module_from_exported",
           "prepare_program", "read_program", "refusal", "run_program", "simplify"]
