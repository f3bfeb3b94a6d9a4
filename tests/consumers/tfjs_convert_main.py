"""tensorflowjs's two converters with their default options, run in a child process with
tensorflowjs on sys.path (as tests/tfjs/convert_jax_models.py, whose recipe this follows):
`python -m tests.consumers.tfjs_convert_main TFJS_PY_DIR OUT_DIR`.

- `convert_jax` (jax2tf replaced by jax2tf_native, as docs/tfjs.md shows) with only the arguments
  it requires: OUT_DIR/convert_jax_NAME for CONVERT_JAX's benchmark models.
- The SavedModel converter, `tensorflowjs_converter --input_format=tf_saved_model SAVED OUT`
  (its console script's own entry point, with the CLI's default flags), on SavedModels written by
  `saved_model_tools.save(..., enable_xla=False)`: OUT_DIR/cli_NAME for CLI's models.
"""
from __future__ import annotations

import sys
import types

CONVERT_JAX = ("mlp",)
CLI = ("cnn", "transformer", "resnet")


def convert_all(tfjs_py_dir: str, out_dir: str) -> None:
    sys.path.append(tfjs_py_dir)
    # TF-DF 1.12.0 does not load in TF 2.21; the converter imports it only to register its ops.
    sys.modules.setdefault("tensorflow_decision_forests",
                           types.ModuleType("tensorflow_decision_forests"))
    import tensorflow as tf
    from tensorflowjs.converters import converter, jax_conversion

    import jax2tf_native
    import saved_model_tools
    from benchmarks import handwritten_pairs
    jax_conversion.jax2tf = jax2tf_native
    for name in CONVERT_JAX:
        pair = handwritten_pairs.PAIRS[name]
        jax_conversion.convert_jax(
            pair.apply, pair.params,
            input_signatures=[tf.TensorSpec((None, *pair.input_shape), tf.float32)],
            polymorphic_shapes=[pair.polymorphic_shape], model_dir=f"{out_dir}/convert_jax_{name}")
    for name in CLI:
        pair = handwritten_pairs.PAIRS[name]
        saved = f"{out_dir}/saved_{name}"
        saved_model_tools.save(saved, pair.apply, pair.params, [pair.inputs(1)],
                               polymorphic_shapes=[pair.polymorphic_shape], enable_xla=False)
        converter.main([f"--input_format=tf_saved_model {saved} {out_dir}/cli_{name}"])


if __name__ == "__main__":
    convert_all(sys.argv[1], sys.argv[2])
