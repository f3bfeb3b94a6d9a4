"""Run in a subprocess with KERAS_BACKEND=jax (tests/jax2tf_native/test_library_callers.py): Keras
3's
SavedModel export (`model.export(..., format="tf_saved_model")`, `keras.export.ExportArchive`)
and orbax-export's `JaxModule`/`ExportManager`, each once with jax2tf's `convert` (the peer) and
once with ours in its place, as those libraries call `jax.experimental.jax2tf.convert`. Prints
one JSON line: per case, the peer's and our results and JAX's own."""
from __future__ import annotations

import json
import os
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native

assert os.environ.get("KERAS_BACKEND") == "jax"
import keras  # noqa: E402

PEER_CONVERT = jax2tf.convert
RNG = np.random.default_rng(0)


def _use(which: str) -> None:
    # Keras and orbax-export import the package and call `jax2tf.convert` at export time.
    jax2tf.convert = PEER_CONVERT if which == "peer" else jax2tf_native.convert


def _values(tree):
    return [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(tree)]


def _x(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _tape(fn, x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(fn(x))
    return tape.gradient(y, x).numpy()


keras.utils.set_random_seed(0)
# Polymorphic batch: (None, 4).
mlp = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                        keras.layers.Dense(2)])
# Several dynamic dimensions: (None, None, 3) (Keras names them batch, a).
seq_in = keras.Input((None, 3))
features = keras.layers.Dense(4, activation="relu")(seq_in)
pooled = keras.layers.GlobalAveragePooling1D()(features)
seq = keras.Model(seq_in, keras.layers.Dense(2)(pooled))
# 45 inputs of (None, None, 3): Keras names their dimensions batch, a ... as.
many_in = [keras.Input((None, 3)) for _ in range(45)]
many = keras.Model(many_in, keras.layers.Add()(
    [keras.layers.GlobalAveragePooling1D()(t) for t in many_in]))

x_mlp = {2: _x(2, 4), 5: _x(5, 4)}
x_seq = {(2, 3): _x(2, 3, 3), (4, 7): _x(4, 7, 3)}
x_many = [_x(2, 1 + i % 4, 3) for i in range(45)]


def keras_cases(which: str, out: str) -> dict:
    _use(which)
    results = {}
    mlp.export(f"{out}/mlp", format="tf_saved_model")
    loaded = tf.saved_model.load(f"{out}/mlp")  # kept: its functions need its variables
    serve = loaded.serve
    results["model.export, polymorphic batch"] = [_values(serve(x)) for x in x_mlp.values()]
    results["model.export, gradient of reloaded"] = _values(_tape(serve, x_mlp[5]))

    archive = keras.export.ExportArchive()
    archive.track(seq)
    archive.add_endpoint("serve", seq.call,
                         input_signature=[tf.TensorSpec((None, None, 3), tf.float32)])
    archive.add_endpoint(
        "serve_tpu_and_cpu", seq.call,
        input_signature=[tf.TensorSpec((None, None, 3), tf.float32)],
        jax2tf_kwargs={"native_serialization_platforms": ("cpu", "tpu")})
    archive.write_out(f"{out}/seq", verbose=False)
    reloaded = tf.saved_model.load(f"{out}/seq")
    results["ExportArchive, dynamic batch and length"] = [
        _values(reloaded.serve(x)) for x in x_seq.values()]
    results["ExportArchive, cpu+tpu endpoint"] = [
        _values(reloaded.serve_tpu_and_cpu(x)) for x in x_seq.values()]
    results["ExportArchive, gradient of reloaded"] = _values(_tape(reloaded.serve, x_seq[4, 7]))

    many.export(f"{out}/many", format="tf_saved_model")
    loaded_many = tf.saved_model.load(f"{out}/many")
    results["model.export, 45 inputs (None, None, 3)"] = _values(loaded_many.serve(x_many))
    return results


def keras_jax_results() -> dict:
    grad = lambda model, x: jax.grad(lambda v: jnp.sum(model(v)))(x)
    return {
        "model.export, polymorphic batch": [_values(mlp(x)) for x in x_mlp.values()],
        "model.export, gradient of reloaded": _values(grad(mlp, x_mlp[5])),
        "ExportArchive, dynamic batch and length": [_values(seq(x)) for x in x_seq.values()],
        "ExportArchive, cpu+tpu endpoint": [_values(seq(x)) for x in x_seq.values()],
        "ExportArchive, gradient of reloaded": _values(grad(seq, x_seq[4, 7])),
        "model.export, 45 inputs (None, None, 3)": _values(many(x_many)),
    }


# --- orbax-export -----------------------------------------------------------------------------

def _orbax_model():
    params = {"w": _x(4, 3), "b": _x(3)}

    def apply(params, x):
        return {"logits": jnp.tanh(x @ params["w"]) + params["b"]}

    return params, apply


ORBAX_PARAMS, ORBAX_APPLY = _orbax_model()
x_orbax = {3: _x(3, 4), 6: _x(6, 4)}


def orbax_cases(which: str, out: str) -> dict:
    from orbax import export as obx
    _use(which)
    module = obx.JaxModule(ORBAX_PARAMS, ORBAX_APPLY, input_polymorphic_shape="b, ...")
    configs = [
        obx.ServingConfig("serving_default",
                          input_signature=[tf.TensorSpec((None, 4), tf.float32, name="x")]),
        obx.ServingConfig("probabilities",
                          input_signature=[tf.TensorSpec((None, 4), tf.float32, name="x")],
                          tf_postprocessor=lambda out: {"p": tf.nn.softmax(out["logits"])}),
    ]
    obx.ExportManager(module, configs).save(f"{out}/orbax")
    loaded = tf.saved_model.load(f"{out}/orbax")
    default, probs = loaded.signatures["serving_default"], loaded.signatures["probabilities"]
    grad_module = obx.JaxModule(ORBAX_PARAMS, ORBAX_APPLY, input_polymorphic_shape="b, ...",
                                trainable=True)
    # The module's TF method (what ExportManager saves), differentiated w.r.t. its variables.
    from orbax.export import constants
    method = grad_module.methods[constants.DEFAULT_METHOD_KEY]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(method(x_orbax[3])["logits"] ** 2)
    variables = tape.watched_variables()
    grads = [np.asarray(g) for g in tape.gradient(loss, variables)]
    return {
        "orbax ExportManager, serving_default": [_values(default(x=tf.constant(x)))
                                                 for x in x_orbax.values()],
        "orbax ExportManager, second signature": [_values(probs(x=tf.constant(x)))
                                                  for x in x_orbax.values()],
        "orbax JaxModule, parameter gradients": [  # w (4, 3), then b (3,)
            g.tolist() for g in sorted(grads, key=lambda g: -g.size)],
    }


def orbax_jax_results() -> dict:
    logits = {k: ORBAX_APPLY(ORBAX_PARAMS, x)["logits"] for k, x in x_orbax.items()}
    grads = jax.grad(lambda p: jnp.sum(ORBAX_APPLY(p, x_orbax[3])["logits"] ** 2))(ORBAX_PARAMS)
    return {
        "orbax ExportManager, serving_default": [_values({"logits": v}) for v in logits.values()],
        "orbax ExportManager, second signature": [_values({"p": jax.nn.softmax(v)})
                                                  for v in logits.values()],
        "orbax JaxModule, parameter gradients": [np.asarray(grads["w"]).tolist(),
                                                 np.asarray(grads["b"]).tolist()],
    }


if __name__ == "__main__":
    results = {"jax": {**keras_jax_results(), **orbax_jax_results()}}
    for which in ("peer", "ours"):
        with tempfile.TemporaryDirectory() as out:
            try:
                results[which] = {**keras_cases(which, out), **orbax_cases(which, out)}
            except Exception as e:  # reported, and the test fails naming it
                import traceback
                results[which] = {"error": f"{type(e).__name__}: {e}"[:3000],
                                  "traceback": traceback.format_exc()[-4000:]}
    sys.stdout.write("\nRESULTS " + json.dumps(results) + "\n")
