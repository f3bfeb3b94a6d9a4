"""Writing, inspecting and verifying SavedModels for TF Serving.

  save            -- a JAX function + params as a SavedModel (Variables, signatures, gradients).
  save_exported   -- the same from a jax.export artifact (no Python source needed).
  save_model      -- a Flax NNX / Linen, Equinox or Keras 3 (JAX backend) model, in one call.
  Signature       -- a further named entry point (other function, TF pre/post-processing).
  manifest        -- what we record inside the SavedModel (readable without JAX).

`save` needs JAX; reading a model back (`manifest`, and the inspect/verify tools) does not, so
this package imports the writer lazily.
"""
from __future__ import annotations


def __getattr__(name):
    if name in ("save", "save_exported", "Signature"):
        import importlib
        writer = importlib.import_module("saved_model_tools.writer")
        return getattr(writer, name)
    if name == "save_model":
        import importlib
        return importlib.import_module("saved_model_tools.framework_models").save_model
    raise AttributeError(f"module 'saved_model_tools' has no attribute {name!r}")


__all__ = ["save", "save_exported", "save_model", "Signature"]
