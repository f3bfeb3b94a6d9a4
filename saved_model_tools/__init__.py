"""Writing, inspecting and verifying SavedModels for TF Serving; the `jax2tf-native` command.

  save            -- a JAX function + params as a SavedModel (Variables, signatures, gradients).
  save_exported   -- the same from a jax.export artifact (no Python source needed).
  save_model      -- a Flax NNX / Linen, Equinox or Keras 3 (JAX backend) model, in one call.
  Signature       -- a further named entry point (other function, TF pre/post-processing).
  manifest        -- what we record inside the SavedModel (readable without JAX).
  save_tfjs, save_model_tfjs -- a JAX function / framework model as a TF.js graph model.
  inspect, verify, tflite, tflite_int8, tfjs -- read, run, convert and quantize a SavedModel
                  without JAX.
  cli             -- the `jax2tf-native` command line (`python -m saved_model_tools`).

This package is the top layer: it imports `jax2tf_native` and `tf_ops`, nothing imports it
(docs/architecture.md; tests/test_layers.py checks it). Inside it there are two sides:

  reading (no JAX): atomic_dir, cli, commands, export_command, inspect*, manifest,
    reference_file, tf_envs, tflite*, verify*, warmup -- they run on a serving host that has
    TensorFlow and no JAX, and import no writing-side module, not even inside a function;
  writing (needs JAX): writer*, signature, pytree_inputs, references, framework_models, demo,
    demo_saved_model, export_fit.

The one boundary between them is `__getattr__` below: the package's public writing names and
its submodules are imported on first attribute access (`saved_model_tools.save`,
`saved_model_tools.verify`). The command line reaches every tool through it, so that
`jax2tf-native --help`, a usage error or `export` of a module that does not import print before
TensorFlow or JAX is imported, and `inspect`/`verify` never import JAX.
"""
from __future__ import annotations

import importlib

# Public names defined by writing-side modules.
_WRITING_NAMES = {
    "save": "saved_model_tools.writer",
    "save_exported": "saved_model_tools.writer_exported",
    "Signature": "saved_model_tools.signature",
    "save_model": "saved_model_tools.framework_models",
    "save_tfjs": "saved_model_tools.writer_tfjs",
    "save_model_tfjs": "saved_model_tools.writer_tfjs",
}

# Submodules the package resolves as attributes on first use (see the docstring).
_SUBMODULES = frozenset({
    "atomic_dir", "cli", "commands", "demo", "demo_saved_model", "export_command", "export_fit",
    "framework_models", "inspect", "large_write", "manifest", "pytree_inputs", "reference_file",
    "references", "signature", "tf_envs", "tfjs", "tfjs_command", "tflite", "tflite_int8",
    "verify", "warmup", "writer", "writer_exported", "writer_tfjs",
})


def __getattr__(name):
    if name in _WRITING_NAMES:
        return getattr(importlib.import_module(_WRITING_NAMES[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'saved_model_tools' has no attribute {name!r}")


__all__ = ["save", "save_exported", "save_model", "Signature"]
