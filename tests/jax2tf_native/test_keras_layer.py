"""`JaxLayer`: a JAX function as a Keras 3 layer (TF backend) whose params are Keras weights:
trained by model.fit with JAX's gradients, kept by model.save / model.export."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

keras = pytest.importorskip("keras", reason="keras (installed with tensorflow) is missing")
if keras.backend.backend() != "tensorflow":
    pytest.skip(f"Keras runs on {keras.backend.backend()!r} here; JaxLayer is for the "
                f"TensorFlow backend", allow_module_level=True)

import jax2tf_native  # noqa: E402


def _block(params, x):
    return jnp.tanh(x @ params["dense"]["w"] + params["dense"]["b"]) * params["scale"]


def _params():
    rng = np.random.default_rng(0)
    return {"dense": {"w": rng.standard_normal((4, 3)).astype(np.float32),
                      "b": np.full((3,), 0.1, np.float32)},
            "scale": np.float32(2.0)}


def _data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    return x, np.sin(x[:, :3]).astype(np.float32)


def _model():
    layer = jax2tf_native.JaxLayer(_block, _params(), trainable_params={"scale": False},
                                   name="jax_block")
    return keras.Sequential([keras.Input((4,)), layer]), layer


def test_fit_steps_the_trainable_weights_with_jax_gradients():
    model, layer = _model()
    assert sorted(w.path for w in model.trainable_weights) == ["jax_block/dense_b",
                                                                "jax_block/dense_w"]
    assert [w.path for w in model.non_trainable_weights] == ["jax_block/scale"]
    x, y = _data()
    model.compile(keras.optimizers.SGD(learning_rate=0.1), "mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)

    def loss(dense):
        return jnp.mean(jnp.mean((_block({**_params(), "dense": dense}, x) - y) ** 2, -1))

    grads = jax.grad(loss)(_params()["dense"])
    want = jax.tree.map(lambda p, g: p - 0.1 * g, _params()["dense"], grads)
    got = {w.path.split("/")[-1]: w.numpy() for w in model.weights}
    np.testing.assert_allclose(got["dense_w"], want["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["dense_b"], want["b"], rtol=1e-5, atol=1e-6)
    assert got["scale"] == 2.0
    np.testing.assert_allclose(model.predict(x, verbose=0),
                               _block({**_params(), "dense": want}, x), rtol=1e-5, atol=1e-6)


def test_saved_with_the_model_as_keras_file_and_saved_model(tmp_path):
    model, _ = _model()
    x, y = _data()
    model.compile(keras.optimizers.SGD(learning_rate=0.1), "mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    want = model.predict(x, verbose=0)
    model.save(tmp_path / "m.keras")
    reloaded = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(reloaded.predict(x[:5], verbose=0), want[:5], rtol=1e-6)
    assert [w.path for w in reloaded.non_trainable_weights] == ["jax_block/scale"]
    # The reloaded layer (the artifact, not the Python function) still trains.
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(reloaded(tf.constant(x)))
    grads = tape.gradient(out, reloaded.trainable_weights)
    dense = {w.path.split("/")[-1][len("dense_"):]: w.numpy() for w in reloaded.trainable_weights}
    want_grads = jax.grad(lambda d: jnp.sum(_block({**_params(), "dense": d}, x)))(dense)
    for w, g in zip(reloaded.trainable_weights, grads):
        np.testing.assert_allclose(g.numpy(), want_grads[w.path.split("/")[-1][len("dense_"):]],
                                   rtol=1e-5, atol=1e-5)
    model.export(str(tmp_path / "saved_model"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "saved_model"))
    np.testing.assert_allclose(served.serve(tf.constant(x)).numpy(), want, rtol=1e-6)
