"""Run as `KERAS_BACKEND=jax python -m tests.jax2tf_native.frameworks.keras_jax_main TMP_DIR`:
a Keras 3 model built from keras.layers on the JAX backend through every front door (Keras picks its backend
once per process, and the test process runs Keras on TensorFlow)."""
import os
import sys
from pathlib import Path

assert os.environ.get("KERAS_BACKEND") == "jax", "run with KERAS_BACKEND=jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tests.jax2tf_native.frameworks.end_to_end import check_model  # noqa: E402


def build():
    image = keras.Input((8, 8, 1), name="image")
    extra = keras.Input((3,), name="extra")
    x = keras.layers.Conv2D(4, 3, activation="relu", name="conv")(image)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Concatenate()([x, extra])
    x = keras.layers.Dropout(0.2)(x)
    logits = keras.layers.Dense(3, name="head")(keras.layers.Dense(8, activation="gelu",
                                                                   name="hidden")(x))
    return keras.Model({"image": image, "extra": extra}, logits, name="classifier")


def main(tmp_dir: str) -> None:
    keras.utils.set_random_seed(0)
    model = build()
    bn = model.get_layer("bn")
    bn.moving_mean.assign(np.full((4,), 0.2, np.float32))
    bn.moving_variance.assign(np.full((4,), 1.5, np.float32))
    rng = np.random.default_rng(0)
    args = [[{"image": rng.standard_normal((b, 8, 8, 1)).astype(np.float32),
              "extra": rng.standard_normal((b, 3)).astype(np.float32)}] for b in (1, 4)]
    non_trainable = sorted(f"params/non_trainable/{v.path}" for v in model.non_trainable_variables)
    assert "params/non_trainable/bn/moving_mean" in non_trainable, non_trainable
    check_model(Path(tmp_dir), model, args, [{"image": "(b, 8, 8, 1)", "extra": "(b, 3)"}],
                expect_trainable=[f"params/trainable/{v.path}" for v in model.trainable_variables],
                expect_non_trainable=non_trainable)
    # The functional form is Keras' own call: compare with model(...) in inference mode.
    from jax2tf_native import frameworks
    functional = frameworks.functional_model(model)
    np.testing.assert_allclose(np.asarray(functional.apply(functional.params, *args[1])),
                               np.asarray(model(args[1][0], training=False)), rtol=1e-6)
    print("KERAS_JAX_OK", len(model.trainable_variables), len(non_trainable))


if __name__ == "__main__":
    main(sys.argv[1])
