"""`FunctionalModel` (a framework model as `apply(params, *args)`), the adapter dispatch, and
`ConvertedModel` (its Variables and converted call as a `tf.Module`)."""
from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import Any, Callable, Sequence

import jax
import tensorflow as tf

from jax2tf_native import converter, tf_variables


@dataclasses.dataclass(frozen=True)
class FunctionalModel:
    """A model as a pure function of its parameters.

    Attributes:
      apply: `apply(params, *args)`, a JAX function.
      params: nested dict of arrays (names become Variable names, e.g. `params/conv/kernel`).
      trainable: which subtrees of params train, for `tf_variables.to_variables` (e.g.
        `{"params": True, "state": False}`); integer leaves never train.
      framework: where the model came from, e.g. "flax.nnx".
    """
    apply: Callable
    params: Any
    trainable: Any
    framework: str


# (module that must already be imported, class attribute path, adapter module)
_ADAPTERS = (
    ("flax.nnx", "Module", "jax2tf_native.frameworks.flax_nnx"),
    ("flax.linen", "Module", "jax2tf_native.frameworks.flax_linen"),
    ("equinox", "Module", "jax2tf_native.frameworks.equinox_module"),
    ("keras", "Model", "jax2tf_native.frameworks.keras_jax"),
)


def functional_model(model: Any, variables: Any = None, *, method: str | Callable | None = None,
                     **call_kwargs) -> FunctionalModel:
    """A `FunctionalModel` from a Flax NNX / Linen, Equinox or Keras 3 model.

    The framework is told by the model's type; only a framework the caller already imported is
    looked at, so this never imports one.

    Args:
      model: an `nnx.Module`, a Linen `nn.Module` (with `variables`), an `eqx.Module`, or a
        `keras.Model` built on the JAX backend. A `FunctionalModel` is returned as is.
      variables: Linen only: the variables dict from `module.init` (`params` train, the
        other collections, e.g. `batch_stats`, do not).
      method: Linen only: the method `apply` calls (default `__call__`).
      **call_kwargs: keyword arguments fixed for every call (e.g. `train=False` for Linen,
        `training=False` for Keras).

    Raises:
      TypeError: the model is none of these (the message lists what is accepted).

    Example:
        >>> import numpy as np
        >>> from flax import nnx
        >>> linear = nnx.Linear(4, 3, rngs=nnx.Rngs(0))   # e.g. after module.eval()
        >>> model = functional_model(linear)
        >>> model.framework
        'flax.nnx'
        >>> x = np.ones((2, 4), np.float32)
        >>> np.allclose(model.apply(model.params, x), linear(x))
        True
    """
    if isinstance(model, FunctionalModel):
        return model
    for module_name, class_name, adapter in _ADAPTERS:
        framework = sys.modules.get(module_name)
        if framework is not None and isinstance(model, getattr(framework, class_name)):
            return importlib.import_module(adapter).functional_model(
                model, variables=variables, method=method, **call_kwargs)
    raise TypeError(f"cannot tell the framework of {type(model).__module__}."
                    f"{type(model).__qualname__}. Fix: pass an nnx.Module, a Linen module with "
                    f"its variables, an eqx.Module or a keras.Model (JAX backend), or a "
                    f"FunctionalModel(apply, params, trainable, framework).")


def _argument_specs(polymorphic_shapes) -> list | None:
    if polymorphic_shapes is None:
        return None
    if isinstance(polymorphic_shapes, str):
        return [None, polymorphic_shapes]
    return [None, *polymorphic_shapes]


class ConvertedModel(tf.Module):
    """A framework model in TF: its parameters as `tf.Variable`s and a converted `__call__`.

    Attributes:
      params: the params pytree with `tf.Variable` leaves (dict keys as strings, as TF
        checkpoints name them: `params["params"]["layers"]["0"]` for an `nnx.List`).
      variables, trainable_variables, non_trainable_variables: flat lists of Variables.
      framework: where the model came from.
    """

    def __init__(self, model: FunctionalModel, converted: Callable):
        super().__init__(name=None)
        params_tree, flat = tf_variables.to_variables(model.params, model.trainable)
        self.params = tf_variables.trackable_params(params_tree)
        self._flat = flat
        # The call rebuilds the tree with its own keys (an int-keyed nnx.List's): TF tracks
        # self.params, whose dict keys it has made strings.
        self._params_treedef = jax.tree.structure(params_tree)
        self._converted = converted
        self.framework = model.framework

    @property
    def variables(self):
        return list(self._flat)

    @property
    def trainable_variables(self):
        return [v for v in self._flat if v.trainable]

    @property
    def non_trainable_variables(self):
        return [v for v in self._flat if not v.trainable]

    def __call__(self, *args):
        return self._converted(jax.tree.unflatten(self._params_treedef, self._flat), *args)


def convert_model(model: Any, *, polymorphic_shapes: Sequence | str | None = None,
                  variables: Any = None, method: str | Callable | None = None,
                  call_kwargs: dict | None = None, **convert_kwargs) -> ConvertedModel:
    """A Flax / Equinox / Keras (JAX backend) model as a `tf.Module` to use in TF code.

    The parameters become `tf.Variable`s (trainable as the framework says) and the call runs
    the model as one XlaCallModule, eagerly or inside your `tf.function`, with TF gradients
    w.r.t. the Variables and the inputs.

    Args:
      model: see `functional_model`.
      polymorphic_shapes: one spec per argument of the model's call (not the parameters),
        e.g. ["(b, 28, 28, 1)"]; a string is the spec of a single argument.
      variables, method: Linen only, see `functional_model`.
      call_kwargs: keyword arguments fixed for every call (e.g. {"train": False}).
      **convert_kwargs: passed to `jax2tf_native.convert` (e.g. `gradient_argnums=0`,
        `polymorphic_constraints`, `linalg`, `enable_xla=False` for plain TF ops).

    Example:
        >>> from flax import nnx
        >>> tf_linear = convert_model(nnx.Linear(4, 3, rngs=nnx.Rngs(0)),
        ...                           polymorphic_shapes=["(b, 4)"])
        >>> with tf.GradientTape() as tape:
        ...     loss = tf.reduce_mean(tf_linear(tf.ones((5, 4))) ** 2)
        >>> grads = tape.gradient(loss, tf_linear.trainable_variables)
        >>> sorted(tuple(g.shape) for g in grads)
        [(3,), (4, 3)]
    """
    functional = functional_model(model, variables, method=method, **(call_kwargs or {}))
    converted = converter.convert(functional.apply,
                                  polymorphic_shapes=_argument_specs(polymorphic_shapes),
                                  **convert_kwargs)
    return ConvertedModel(functional, converted)
