"""The writing side: JAX functions and models as SavedModels (and TF.js models); needs JAX.

  saved_model       -- `save`: a JAX function and its parameters as a SavedModel, in one call.
  traced_signature  -- one signature resolved and traced into the tf.function it serves.
  records           -- what `save` records beside the graph: references, manifest, warmup.
  references        -- JAX's reference outputs: batch sizes, random inputs, the .npz files.
  progress          -- `save`'s progress lines (phases; bytes of large parameters).
  signature         -- `Signature`: a further named entry point of the SavedModel.
  pytree_inputs     -- pytree arguments flattened into named signature inputs.
  exported          -- `save_exported`: the same from a jax.export artifact.
  framework_models  -- `save_model`: a Flax, Equinox or Keras 3 model, in one call.
  tfjs_model        -- `save_tfjs`, `save_model_tfjs`: the same as a TF.js graph model.
  export_fit        -- whether `jax2tf-native export`'s --input and --params fit the function.

Nothing on the reading side (inspect, verify, tflite, tfjs, cli) imports these modules; the
package's public names (`saved_model_tools.save`, ...) reach them on first use. This `__init__`
imports nothing either: `jax2tf-native export` reaches `write.export_fit` (JAX, no TensorFlow)
before TensorFlow is imported, so the public names and the modules resolve here on first use.
"""
from saved_model_tools.lazy_names import lazy_names

_PUBLIC = {"save": "saved_model", "save_exported": "exported", "save_model": "framework_models",
           "Signature": "signature", "save_tfjs": "tfjs_model", "save_model_tfjs": "tfjs_model"}
_SUBMODULES = frozenset({
    "saved_model", "traced_signature", "records", "references", "progress", "signature",
    "pytree_inputs", "exported", "framework_models", "tfjs_model", "export_fit"})

__getattr__ = lazy_names(__name__, _PUBLIC, _SUBMODULES)


__all__ = sorted(_PUBLIC)
