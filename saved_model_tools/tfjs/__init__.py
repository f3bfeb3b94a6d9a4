"""`tfjs`: a SavedModel written with `enable_xla=False` as a TF.js graph model, without JAX.

  convert  -- `convert_to_tfjs`: checks what TF.js can run, then writes model.json and the
              weight shards (the format tensorflowjs writes; no tensorflowjs package needed).
  graph    -- the rewrites of the frozen graph before it is written (assertions dropped,
              Erfc, Grappler through tf_ops.graph_passes, then `fusion`).
  fusion   -- the folds and fusions tensorflowjs's converter makes of a hand-written model.

From a JAX function or framework model in one call: `saved_model_tools.save_tfjs` /
`save_model_tfjs` (saved_model_tools/write/tfjs_model.py, the writing side); from the command
line: `jax2tf-native tfjs DIR --out OUT`. The public names of `convert` are importable from
here (`saved_model_tools.tfjs.convert_to_tfjs`).
"""
from saved_model_tools.tfjs.convert import (
    SHARD_BYTES, TfjsExportError, TfjsReport, convert_to_tfjs, supported_ops)

__all__ = ["SHARD_BYTES", "TfjsExportError", "TfjsReport", "convert_to_tfjs", "supported_ops"]
