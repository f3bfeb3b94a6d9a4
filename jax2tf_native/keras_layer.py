"""`JaxLayer`: a JAX function with its parameters as a Keras 3 layer on the TensorFlow backend.

The other direction from `convert_model`: a Keras/TF model gets a JAX block whose parameters
are Keras weights, so `model.fit` trains them (gradients through the exported JAX VJP).
`model.save("m.keras")` keeps the layer as its `jax.export` artifact (serialized with its VJP,
so a reloaded model trains too; no JAX source needed to load it), `model.export` writes a
SavedModel, and `save_weights` the weights.
"""
from __future__ import annotations

import base64
from typing import Any, Callable, Sequence

import jax
import keras
import numpy as np
import tensorflow as tf

from jax2tf_native import converter, tf_variables


@keras.saving.register_keras_serializable(package="jax2tf_native")
class JaxLayer(keras.layers.Layer):
    """Calls `fn(params, *inputs)` with `params` held as Keras weights.

    Args:
      fn: the JAX function `fn(params, *inputs)`.
      params: a pytree of arrays: the weights' initial values (weights are named by path,
        e.g. `dense_w`).
      polymorphic_shapes: one spec per input (not params), e.g. ["(b, 4)"]; default a
        polymorphic leading batch dimension on each input ("(b, ...)").
      trainable_params: which params train: None (float leaves), a bool, or a nested dict
        following params' keys, e.g. {"params": True, "batch_stats": False}.
      convert_kwargs: passed to `jax2tf_native.convert` (e.g. {"gradient_argnums": 0} when
        the inputs need no gradient, which skips their cotangent).
      **layer_kwargs: `keras.layers.Layer` arguments (name, dtype, ...).

    Raises:
      ValueError: Keras runs on another backend than TensorFlow.

    Example:
        >>> import jax.numpy as jnp
        >>> layer = JaxLayer(lambda p, x: jnp.tanh(x @ p["w"]), {"w": np.ones((4, 2), "f4")})
        >>> model = keras.Sequential([keras.Input((4,)), layer, keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> x, y = np.ones((8, 4), "f4"), np.zeros((8, 1), "f4")
        >>> history = model.fit(x, y, epochs=1, verbose=0)
        >>> [v.shape for v in layer.trainable_variables]
        [TensorShape([4, 2])]
    """

    def __init__(self, fn: Callable, params: Any, *, polymorphic_shapes: Sequence | None = None,
                 trainable_params: Any = None, convert_kwargs: dict | None = None,
                 **layer_kwargs):
        if keras.backend.backend() != "tensorflow":
            raise ValueError(f"JaxLayer runs converted JAX functions as TF ops, so it needs the "
                             f"'tensorflow' Keras backend, not {keras.backend.backend()!r}. "
                             f"Fix: on the JAX backend call the JAX function directly.")
        super().__init__(**layer_kwargs)
        leaves_with_path, self._treedef = jax.tree_util.tree_flatten_with_path(params)
        choices = tf_variables.trainable_leaves(params, trainable_params)
        self._weights_flat = []
        for (key_path, leaf), choice in zip(leaves_with_path, choices):
            value = np.asarray(leaf)
            floating = tf.dtypes.as_dtype(value.dtype).is_floating
            self._weights_flat.append(self.add_weight(
                shape=value.shape, dtype=tf.dtypes.as_dtype(value.dtype).name,
                initializer=keras.initializers.Constant(value),
                trainable=floating and choice is not False,
                # Keras weight names may not hold "/": params/dense/w -> dense_w.
                name=tf_variables.variable_name(key_path).removeprefix("params/")
                .replace("/", "_")))
        self._fn = fn
        self._polymorphic_shapes = polymorphic_shapes
        self._convert_kwargs = dict(convert_kwargs or {})
        self._converted = None
        self._input_examples = None
        self._trainable_leaves = [w.trainable for w in self._weights_flat]

    def _converted_fn(self, n_inputs: int) -> Callable:
        if self._converted is None:
            specs = (list(self._polymorphic_shapes) if self._polymorphic_shapes is not None
                     else ["(b, ...)"] * n_inputs)
            self._converted = converter.convert(self._fn, polymorphic_shapes=[None, *specs],
                                                **self._convert_kwargs)
        return self._converted

    def call(self, *inputs):
        if self._input_examples is None:  # what get_config exports for
            self._input_examples = [np.zeros([d or 1 for d in x.shape],
                                             tf.dtypes.as_dtype(x.dtype).as_numpy_dtype)
                                    for x in inputs]
        # Keras Variables wrap tf.Variables (`.value`); the TF tape sees the tf.Variable.
        params = jax.tree_util.tree_unflatten(self._treedef,
                                              [w.value for w in self._weights_flat])
        return self._converted_fn(len(inputs))(params, *inputs)

    def get_config(self) -> dict:
        """The layer as its `jax.export` artifact (with its VJP), for `model.save`."""
        if self._input_examples is None:
            raise ValueError(f"JaxLayer {self.name!r} has not been called, so its input shapes "
                             f"are unknown. Fix: build the model (call it once) before saving.")
        specs = (list(self._polymorphic_shapes) if self._polymorphic_shapes is not None
                 else ["(b, ...)"] * len(self._input_examples))
        params = jax.tree_util.tree_unflatten(
            self._treedef, [jax.ShapeDtypeStruct(w.shape, np.dtype(w.dtype))
                            for w in self._weights_flat])
        scope = jax.export.SymbolicScope()
        inputs = [jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec, like=x.shape,
                                                                 scope=scope), x.dtype)
                  for spec, x in zip(specs, self._input_examples)]
        exported = jax.export.export(jax.jit(self._fn))(params, *inputs)
        config = super().get_config()
        config.update(
            exported=base64.b64encode(exported.serialize(vjp_order=1)).decode("ascii"),
            trainable_leaves=list(self._trainable_leaves), polymorphic_shapes=specs)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "JaxLayer":
        """Rebuilds the layer from its artifact; Keras then loads the weights' values."""
        config = dict(config)
        exported = jax.export.deserialize(base64.b64decode(config.pop("exported")))
        trainable_leaves = config.pop("trainable_leaves")
        (params_avals, *_), _ = jax.tree_util.tree_unflatten(exported.in_tree,
                                                             exported.in_avals)
        treedef = jax.tree_util.tree_structure(params_avals)
        params = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), params_avals)
        return cls(lambda p, *args: exported.call(p, *args), params,
                   trainable_params=jax.tree_util.tree_unflatten(treedef, trainable_leaves),
                   **config)
