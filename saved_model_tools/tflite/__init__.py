"""`tflite`: a SavedModel through TF's TFLite converter, checked by the TFLite interpreter
against the recorded JAX outputs; read without JAX.

  convert           -- `convert_to_tflite`: float conversion (TFLITE_BUILTINS, SELECT_TF_OPS
                       only when asked), run on the recorded references and compared.
  int8              -- `quantize_int8`: full-integer quantization, its operators and accuracy.
  report            -- `TfliteReport` and the exit codes of `jax2tf-native tflite`.
  converter_errors  -- the converter's errors as one line each, with the user's JAX line.

The public names of `convert`, `int8` and `report` are importable from here
(`saved_model_tools.tflite.convert_to_tflite`, `saved_model_tools.tflite.quantize_int8`);
`saved_model_tools.tflite_int8` is `tflite.int8` under its name before the rooms.
"""
from saved_model_tools.tflite import int8
from saved_model_tools.tflite.convert import convert_to_tflite, operators, without_nan_guards
from saved_model_tools.tflite.converter_errors import converter_error_lines
from saved_model_tools.tflite.int8 import Int8Accuracy, Int8Report, quantize_int8
from saved_model_tools.tflite.report import (
    BUILTINS, BUILTINS_AND_SELECT, EXIT_NOT_CONVERTED, TfliteReport)

__all__ = ["BUILTINS", "BUILTINS_AND_SELECT", "EXIT_NOT_CONVERTED", "Int8Accuracy", "Int8Report",
           "TfliteReport", "convert_to_tflite", "converter_error_lines", "int8", "operators",
           "quantize_int8", "without_nan_guards"]
