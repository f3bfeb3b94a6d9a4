"""`functional_model` / `convert_model` with a bare FunctionalModel, and unknown models."""
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native.frameworks import FunctionalModel, functional_model


def test_functional_model_converts_with_its_trainable_split():
    model = FunctionalModel(lambda p, x: x * p["scale"] + p["stats"]["shift"],
                            {"scale": np.float32(3.0), "stats": {"shift": np.ones(2, np.float32)}},
                            {"stats": False}, "plain")
    converted = jax2tf_native.convert_model(model, polymorphic_shapes="(b, 2)")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(converted(x).numpy(), x * 3.0 + 1.0)
    assert [v.name for v in converted.trainable_variables] == ["params/scale:0"]
    assert [v.name for v in converted.non_trainable_variables] == ["params/stats/shift:0"]
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(converted(x))
    np.testing.assert_allclose(tape.gradient(y, converted.trainable_variables[0]).numpy(),
                               x.sum())


def test_unknown_model_type_names_what_is_accepted():
    with pytest.raises(TypeError, match="nnx.Module.*eqx.Module.*keras.Model"):
        functional_model(lambda x: jnp.sin(x))
