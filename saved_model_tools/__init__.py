"""Writing, inspecting and verifying SavedModels for TF Serving; the `jax2tf-native` command.

  save            -- a JAX function + params as a SavedModel (Variables, signatures, gradients).
  save_exported   -- the same from a jax.export artifact (no Python source needed).
  save_model      -- a Flax NNX / Linen, Equinox or Keras 3 (JAX backend) model, in one call.
  Signature       -- a further named entry point (other function, TF pre/post-processing).
  save_tfjs, save_model_tfjs -- a JAX function / framework model as a TF.js graph model.

Its rooms, the reading side first (no JAX: they run on a serving host that has TensorFlow and
no JAX, and import no writing-side module, not even inside a function):

  inspect/    -- what a SavedModel holds and which TF runs it (`inspect.inspect_saved_model`).
  verify/     -- run it without JAX as TF Serving would, against JAX's outputs (`verify.verify`).
  tflite/     -- TFLite conversion checked by the interpreter; int8 quantization (`tflite.int8`).
  tfjs/       -- a plain-ops SavedModel as a TF.js graph model (`tfjs.convert_to_tfjs`).
  cli/        -- the `jax2tf-native` command line (`python -m saved_model_tools`), one parser.
  manifest, warmup, reference_file, atomic_dir -- what we record inside a SavedModel (manifest,
                 TF Serving warmup requests, reference inputs/outputs) and the atomic directory
                 write; both sides use them.

and the writing side (needs JAX):

  write/      -- `save`, `save_exported`, `save_model`, `Signature`, `save_tfjs` and their parts.
  demo/       -- `jax2tf-native demo`.

This package is the top layer: it imports `jax2tf_native` and `tf_ops`, nothing imports it
(docs/architecture.md; tests/test_layers.py checks it). The one boundary between its sides is
`__getattr__` below: the public writing names and the rooms are imported on first attribute
access (`saved_model_tools.save`, `saved_model_tools.verify`). The command line reaches every
tool through it, so that `jax2tf-native --help`, a usage error or `export` of a module that does
not import print before TensorFlow or JAX is imported, and `inspect`/`verify` never import JAX.
"""
from __future__ import annotations

import importlib

# Public names of the writing side: the module that defines each.
_WRITING_NAMES = {
    "save": "saved_model_tools.write.saved_model",
    "save_exported": "saved_model_tools.write.exported",
    "save_model": "saved_model_tools.write.framework_models",
    "Signature": "saved_model_tools.write.signature",
    "save_tfjs": "saved_model_tools.write.tfjs_model",
    "save_model_tfjs": "saved_model_tools.write.tfjs_model",
}

# Modules the package resolves as attributes on first use (see the docstring).
_MODULES = {
    **{name: f"saved_model_tools.{name}" for name in (
        "inspect", "verify", "tflite", "tfjs", "cli", "write", "demo",
        "manifest", "warmup", "reference_file", "atomic_dir")},
    # `quantize_int8`'s module, under the name it had before the rooms (docs/api, users).
    "tflite_int8": "saved_model_tools.tflite.int8",
}


def __getattr__(name):
    if name in _WRITING_NAMES:
        return getattr(importlib.import_module(_WRITING_NAMES[name]), name)
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'saved_model_tools' has no attribute {name!r}")


__all__ = ["save", "save_exported", "save_model", "Signature"]
