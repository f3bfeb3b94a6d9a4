"""`jax2tf-native demo` (writing side: needs JAX).

  jax_vs_tf    -- the built-in example model converted, JAX and TF compared and timed.
  saved_model  -- `demo --out DIR`: a briefly trained model saved, then verified without JAX;
                  also `small_saved_model()`, the small SavedModel the docstrings' examples use.
"""
from saved_model_tools.demo import jax_vs_tf, saved_model

__all__ = ["jax_vs_tf", "saved_model"]
