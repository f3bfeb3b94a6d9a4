"""Run in a subprocess with KERAS_BACKEND=tensorflow (tests/jax2tf_native/test_library_callers.py):
Keras 3's
`keras.layers.JaxLayer` and `FlaxLayer`, which call `jax.experimental.jax2tf.convert` on the
TF backend, once with the peer's `convert` and once with ours in its place. Prints one JSON
line: per case, the peer's and our results and JAX's own."""
from __future__ import annotations

import json
import os
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native

assert os.environ.get("KERAS_BACKEND") == "tensorflow"
import keras  # noqa: E402

PEER_CONVERT = jax2tf.convert
RNG = np.random.default_rng(0)
PARAMS = {"w": RNG.normal(size=(3, 2)).astype(np.float32),
          "b": RNG.normal(size=(2,)).astype(np.float32)}


def _use(which: str) -> None:
    # JaxLayer imports the package and calls `jax2tf.convert` when it builds.
    jax2tf.convert = PEER_CONVERT if which == "peer" else jax2tf_native.convert


def _x(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def dense(params, inputs):  # inputs (batch, length, 3): several dynamic dimensions
    return jnp.tanh(jnp.mean(inputs, axis=1) @ params["w"] + params["b"])


class FlaxMlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(nn.tanh(nn.Dense(5)(x)))


FLAX_PARAMS = FlaxMlp().init(jax.random.PRNGKey(0), np.zeros((1, 4), np.float32))
X_SEQ = {(2, 3): _x(2, 3, 3), (5, 6): _x(5, 6, 3)}
X_FLAT = {2: _x(2, 4), 7: _x(7, 4)}


def _model(layer, shape):
    inputs = keras.Input(shape)
    return keras.Model(inputs, layer(inputs))


def _grads(model, x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
    variables = model.trainable_variables
    return [g.numpy() for g in tape.gradient(loss, variables)], [v.shape for v in variables]


def _by_size(arrays):
    return [np.asarray(a).tolist() for a in sorted(arrays, key=lambda a: (-a.size, a.shape))]


def cases(which: str) -> dict:
    _use(which)
    results = {}
    jax_layer = _model(keras.layers.JaxLayer(dense, params=jax.tree.map(np.copy, PARAMS)),
                       (None, 3))
    results["JaxLayer, dynamic batch and length"] = [jax_layer(x).numpy().tolist()
                                                     for x in X_SEQ.values()]
    results["JaxLayer, parameter gradients"] = _by_size(_grads(jax_layer, X_SEQ[5, 6])[0])
    graph = tf.function(jax_layer, autograph=False)
    results["JaxLayer in tf.function"] = [graph(x).numpy().tolist() for x in X_SEQ.values()]
    # Deliberate difference (docs/compat.md): traced at static shapes, our outputs carry the
    # static sizes the module computes; the peer's XlaCallModule reports them as None.
    traced = graph.get_concrete_function(tf.TensorSpec((2, 3, 3), tf.float32))
    results["JaxLayer traced at static shapes: output shape"] = traced.outputs[0].shape.as_list()
    multi = _model(keras.layers.JaxLayer(dense, params=jax.tree.map(np.copy, PARAMS),
                                         native_serialization_platforms=("cpu", "tpu")),
                   (None, 3))
    results["JaxLayer, cpu+tpu"] = [multi(x).numpy().tolist() for x in X_SEQ.values()]
    flax_model = _model(keras.layers.FlaxLayer(FlaxMlp(), variables=jax.tree.map(
        np.copy, FLAX_PARAMS)), (4,))
    results["FlaxLayer, polymorphic batch"] = [flax_model(x).numpy().tolist()
                                               for x in X_FLAT.values()]
    results["FlaxLayer, parameter gradients"] = _by_size(_grads(flax_model, X_FLAT[7])[0])
    return results


def jax_results() -> dict:
    seq = [np.asarray(dense(PARAMS, x)).tolist() for x in X_SEQ.values()]
    grads = jax.grad(lambda p: jnp.sum(dense(p, X_SEQ[5, 6]) ** 2))(PARAMS)
    apply = lambda p, x: FlaxMlp().apply({"params": p}, x)
    flax_grads = jax.grad(lambda p: jnp.sum(apply(p, X_FLAT[7]) ** 2))(FLAX_PARAMS["params"])
    return {
        "JaxLayer, dynamic batch and length": seq,
        "JaxLayer, parameter gradients": _by_size(jax.tree.leaves(grads)),
        "JaxLayer in tf.function": seq,
        "JaxLayer traced at static shapes: output shape": [2, 2],
        "JaxLayer, cpu+tpu": seq,
        "FlaxLayer, polymorphic batch": [np.asarray(apply(FLAX_PARAMS["params"], x)).tolist()
                                         for x in X_FLAT.values()],
        "FlaxLayer, parameter gradients": _by_size(
            [np.asarray(g) for g in jax.tree.leaves(flax_grads)]),
    }


if __name__ == "__main__":
    results = {"jax": jax_results()}
    for which in ("peer", "ours"):
        try:
            results[which] = cases(which)
        except Exception as e:  # reported, and the test fails naming it
            import traceback
            results[which] = {"error": f"{type(e).__name__}: {e}"[:3000],
                              "traceback": traceback.format_exc()[-4000:]}
    sys.stdout.write("\nRESULTS " + json.dumps(results) + "\n")
