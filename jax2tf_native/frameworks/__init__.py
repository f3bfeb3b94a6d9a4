"""Front doors for models written with Flax (NNX and Linen), Equinox and Keras 3 (JAX backend).

Each framework keeps parameters its own way (an `nnx.Module` graph, Linen's variable
collections, an `eqx.Module` pytree, Keras `Variable`s). The adapters here turn a model into a
`FunctionalModel`: `apply(params, *args)` over a nested dict of arrays, and which
subtrees are trainable (NNX `Param`, Linen's `params` collection, Keras' trainable variables).

  functional_model -- a FunctionalModel from any supported model (detected by type).
  convert_model    -- the model as a `tf.Module`: Variables + a converted `__call__`.
  FunctionalModel  -- apply + params + trainable choice.
  ConvertedModel   -- what convert_model returns.

The frameworks are optional: each adapter module imports its framework, and is imported only
when a model of that framework is given (`import jax2tf_native` imports none of them).
"""
from jax2tf_native.frameworks.functional import (ConvertedModel, FunctionalModel,
                                                 convert_model, functional_model)

__all__ = ["ConvertedModel", "FunctionalModel", "convert_model", "functional_model"]
