"""`save_model`: a Flax (NNX, Linen), Equinox or Keras 3 (JAX backend) model as a SavedModel,
in one call, with the framework's trainable / non-trainable split kept."""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from jax2tf_native import frameworks
from saved_model_tools import manifest
from saved_model_tools.write import saved_model as writer


def save_model(export_dir: str | os.PathLike, model: Any, example_args: Sequence[Any], *,
               variables: Any = None, method: str | Callable | None = None,
               call_kwargs: dict | None = None, **save_kwargs) -> manifest.Manifest:
    """Writes a framework model as a SavedModel for TF Serving (see `saved_model_tools.save`).

    The parameters become Variables named by their path (`params/params/conv/kernel` for NNX,
    `params/params/Dense_0/kernel` for Linen, `params/layers/0/weight` for Equinox,
    `params/trainable/dense/kernel` for Keras). The restored object's `.trainable_variables`
    are NNX `Param`s / Linen's `params` collection / Equinox's float arrays / Keras' trainable
    variables; `.non_trainable_variables` the rest (batch statistics, counters).

    Args:
      export_dir: the SavedModel directory.
      model: an `nnx.Module` (after `.eval()` for inference), a Linen module (with
        `variables`), an `eqx.Module`, a built `keras.Model` on the JAX backend, or a
        `jax2tf_native.frameworks.FunctionalModel`.
      example_args: example arguments of the model's call (arrays or pytrees, e.g. a dict of
        `token_ids` and `padding_mask`, whose leaves become inputs named by key path).
      variables, method: Linen only: `module.init`'s variables, and the method to call.
      call_kwargs: keyword arguments fixed for every call (e.g. {"train": False}).
      **save_kwargs: as for `saved_model_tools.save` (polymorphic_shapes, input_names,
        polymorphic_constraints, signatures, `enable_xla=False` for plain TF ops, ...);
        `trainable` overrides the framework's split.

    Example:
        >>> import tempfile
        >>> import numpy as np
        >>> from flax import nnx
        >>> model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
        >>> record = save_model(tempfile.mkdtemp() + "/linear/1", model,
        ...                     [np.ones((4, 3), np.float32)], polymorphic_shapes=["(b, 3)"],
        ...                     input_names=["x"])
        >>> [(t.name, t.shape) for t in record.signature("serving_default").inputs]
        [('x', (None, 3))]
    """
    functional = frameworks.functional_model(model, variables, method=method,
                                             **(call_kwargs or {}))
    save_kwargs.setdefault("trainable", functional.trainable)
    return writer.save(export_dir, functional.apply, functional.params, example_args,
                       **save_kwargs)
