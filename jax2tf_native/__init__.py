"""jax2tf-native: run JAX functions in TensorFlow as single XlaCallModule ops, via jax.export.

Public API:
  convert              -- drop-in for jax.experimental.jax2tf.convert.
  input_signature      -- tf.TensorSpec pytree for tf.function, None where symbolic.
  call_exported        -- run a jax.export.Exported (or its bytes) as a TF function.
  check_grads_tf       -- TF tape gradients (any order) vs JAX and finite differences.
  errors               -- PolymorphicShapeError, ArgumentShapeError, ArgumentTypeError,
                          ExportedModuleError, CustomCallNotAllowedError.
"""
from jax2tf_native.call_exported import call_exported
from jax2tf_native.converter import convert
from jax2tf_native.grad_check import GradientCheckError, check_grads_tf
from jax2tf_native.errors import (ArgumentShapeError, ArgumentTypeError,
                                  CustomCallNotAllowedError, ExportedModuleError,
                                  PolymorphicShapeError)
from jax2tf_native.poly_specs import input_signature

__version__ = "0.1.0"

__all__ = [
    "convert", "input_signature", "call_exported", "check_grads_tf", "GradientCheckError",
    "ArgumentShapeError", "ArgumentTypeError", "CustomCallNotAllowedError", "ExportedModuleError",
    "PolymorphicShapeError",
]
