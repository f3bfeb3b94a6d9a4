"""Keras 3 models on the JAX backend as `FunctionalModel`s, through `model.stateless_call`.

Variables keep Keras' split: `model.trainable_variables` train, `non_trainable_variables`
(BatchNormalization moving statistics, seed states) do not. Parameters are nested by each
variable's Keras path ("dense/kernel" -> params["trainable"]["dense"]["kernel"]).
"""
from __future__ import annotations

from typing import Any

import keras

from jax2tf_native.frameworks.functional import FunctionalModel


def _nest(variables) -> dict:
    tree = {}
    for variable in variables:
        node, parts = tree, variable.path.split("/")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if parts[-1] in node:
            raise ValueError(f"two Keras variables share the path {variable.path!r}. Fix: give "
                             f"the layers distinct names.")
        node[parts[-1]] = keras.ops.convert_to_numpy(variable.value)
    return tree


def _values(tree: dict, variables) -> list:
    values = []
    for variable in variables:
        node = tree
        for part in variable.path.split("/"):
            node = node[part]
        values.append(node)
    return values


def functional_model(model: keras.Model, variables: Any = None, *, method=None,
                     **call_kwargs) -> FunctionalModel:
    """`apply(params, *args)` == `model(*args, **call_kwargs)`, JAX-traceable.

    Raises:
      ValueError: Keras runs on another backend than JAX (set KERAS_BACKEND=jax before
        importing keras), or the model is not built.

    Example:
        >>> import os, subprocess, sys
        >>> program = "; ".join([  # Keras picks its backend once per process: a new one
        ...     "import keras",
        ...     "from jax2tf_native.frameworks.keras_jax import functional_model",
        ...     "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])",
        ...     "print(sorted(functional_model(model, training=False).params))"])
        >>> env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
        >>> print(subprocess.run([sys.executable, "-c", program], env=env, check=True,
        ...                      capture_output=True, text=True).stdout.strip())
        ['non_trainable', 'trainable']
    """
    if keras.backend.backend() != "jax":
        raise ValueError(f"Keras runs on the {keras.backend.backend()!r} backend; its models "
                         f"are JAX functions only on the 'jax' backend. Fix: set "
                         f"KERAS_BACKEND=jax before Python imports keras (or tensorflow).")
    if variables is not None or method is not None:
        raise TypeError("a keras.Model holds its own variables and is called through "
                        "stateless_call; pass variables=/method= only for Linen.")
    if not model.built:
        raise ValueError(f"Keras model {model.name!r} is not built, so it has no variables yet. "
                         f"Fix: call it once on an example batch (or model.build(shape)).")
    trainable, non_trainable = list(model.trainable_variables), list(model.non_trainable_variables)

    def apply(params, *args):
        outputs, _ = model.stateless_call(_values(params["trainable"], trainable),
                                          _values(params["non_trainable"], non_trainable),
                                          *args, **call_kwargs)
        return outputs

    apply.__name__ = model.name if model.name.isidentifier() else "keras_model"
    params = {"trainable": _nest(trainable), "non_trainable": _nest(non_trainable)}
    return FunctionalModel(apply, params, {"trainable": True, "non_trainable": False},
                           "keras")
