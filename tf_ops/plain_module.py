"""An exported module as ordinary TF ops (`enable_xla=False`): the checked `tf_ops.plain.Program`
that `xla_call_module.call` runs instead of building the `XlaCallModule` op.

`plain_module_from_exported` reads and checks the module at conversion, so an op that cannot be
lowered exactly fails there (`PlainLoweringError`, naming op, dtype and source line), before any
graph or file is written. `PlainModule.call` builds the ops in the current graph; eagerly it runs
one `tf.function` per input signature instead of re-emitting every op on every call.
"""
from __future__ import annotations

import threading
from typing import Sequence

import jax
import tensorflow as tf

from tf_ops import plain

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
        >>> plain_module_from_exported(exp).call([tf.zeros(2)])[0].numpy()
        array([0., 0.], dtype=float32)
    """

    def __init__(self, program: plain.Program, fun_name: str):
        self.program = program
        self.fun_name = fun_name
        self._lock = threading.Lock()
        self._eager: tf.types.experimental.PolymorphicFunction | None = None

    def call(self, kept: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """The module's outputs on the inputs it keeps: plain TF ops in the current graph, or
        eagerly the cached `tf.function` of them (traced once, and once more for inputs whose
        symbolic dimensions vary)."""
        if not tf.executing_eagerly():
            return plain.run_program(self.program, list(kept))
        return list(self._eager_function()(*kept))

    def _eager_function(self):
        with self._lock:
            if self._eager is None:
                program = self.program

                def run(*xs):
                    return plain.run_program(program, list(xs))

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


def plain_module_from_exported(exported: jax.export.Exported,
                               n_tf_functions: int = 0) -> PlainModule:
    """Reads `exported`'s module and checks that every op lowers exactly to plain TF ops.

    Raises:
      tf_ops.plain.PlainLoweringError: the module, or one of its ops, cannot be lowered (the
        message names the op, its dtypes, the user's source line, why and the fix).
    """
    why = refusal(exported, n_tf_functions)
    if why is not None:
        raise plain.PlainLoweringError(
            f"enable_xla=False cannot lower '{exported.fun_name}' to plain TensorFlow ops: "
            f"{why}.")
    program = plain.read_program(exported.mlir_module())
    for op in program.ops():
        if op.name == "stablehlo.custom_call" and op.attr("call_target_name") == _CALL_TF_TARGET:
            raise plain.PlainLoweringError(
                f"enable_xla=False cannot lower '{exported.fun_name}' to plain TensorFlow ops: "
                f"{_CALL_TF_REFUSAL}.")
    program = plain.simplify(program)
    plain.check_program(program)
    return PlainModule(program, exported.fun_name)

