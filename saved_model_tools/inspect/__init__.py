"""`inspect`: what a SavedModel holds and which TensorFlow can run it, read without JAX.

  saved_model        -- `inspect_saved_model` (the report) and `check_readable` (what `verify`
                        and `tflite` check before TF loads a model).
  report             -- the report's records (`SavedModelReport`, ...) and their text form.
  proto              -- saved_model.pb and the checkpoint index, read.
  stablehlo          -- each module's header, text and custom calls, read by the installed TF.
  tf_version_matrix  -- the measured TF version matrix (data/tf_version_matrix.json), read.
  oldest_tf          -- the oldest TF that runs a module or a model: the rule on that matrix.

Imports one way inside: report <- proto, stablehlo, oldest_tf <- saved_model. Every public name
of these modules is importable from here (`saved_model_tools.inspect.inspect_saved_model`).

Example:
    >>> import saved_model_tools
    >>> from saved_model_tools.demo.saved_model import small_saved_model
    >>> report = saved_model_tools.inspect.inspect_saved_model(small_saved_model())
    >>> [s.name for s in report.signatures]
    ['serving_default']
"""
from saved_model_tools.inspect.oldest_tf import combined_support, tf_support
from saved_model_tools.inspect.proto import (
    called_functions, check_contained, check_data_shards, dtype_name, function_edges,
    read_saved_model_proto, read_variables, select_meta_graph, signature_functions,
    tensor_report)
from saved_model_tools.inspect.report import (
    CustomCallReport, ModuleReport, SavedModelReadError, SavedModelReport, SignatureReport,
    TensorReport, TfSupport, VariableReport)
from saved_model_tools.inspect.saved_model import (
    PLAIN_TF_OPS, XLA_CALL_MODULE, check_readable, graph_op_types, inspect_saved_model)
from saved_model_tools.inspect.stablehlo import (
    BYTECODE_MAGIC, STABLEHLO_PRODUCER, custom_call_report, custom_call_targets, main_signature,
    module_text, native_stderr_captured, raw_vhlo_text, rewritten_lapack_targets,
    stablehlo_producer)
from saved_model_tools.inspect.tf_version_matrix import (
    TF_VERSION_MATRIX_FILE, load_tf_version_matrix, version_tuple)

__all__ = [
    "BYTECODE_MAGIC", "CustomCallReport", "ModuleReport", "PLAIN_TF_OPS", "STABLEHLO_PRODUCER",
    "SavedModelReadError", "SavedModelReport", "SignatureReport", "TF_VERSION_MATRIX_FILE",
    "TensorReport", "TfSupport", "VariableReport", "XLA_CALL_MODULE", "called_functions",
    "check_contained", "check_data_shards", "check_readable", "combined_support",
    "custom_call_report", "custom_call_targets", "dtype_name", "function_edges",
    "graph_op_types", "inspect_saved_model", "load_tf_version_matrix", "main_signature",
    "module_text", "native_stderr_captured", "raw_vhlo_text", "read_saved_model_proto",
    "read_variables", "rewritten_lapack_targets", "select_meta_graph", "signature_functions",
    "stablehlo_producer", "tensor_report", "tf_support", "version_tuple",
]
