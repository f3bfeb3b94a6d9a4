"""The built-in example model: a small CNN classifier for 28x28x1 images, in pure JAX.

Deterministic: parameters come from a fixed PRNG seed; nothing is downloaded. It uses an exact
(erf-based) GELU on purpose: `erf` is one of the ops the peer jax2tf cannot run in TF 2.21.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
POLYMORPHIC_SHAPE = "(b, 28, 28, 1)"


def init_params(seed: int = 0) -> dict:
    """Parameters as a dict of float32 arrays, identical for the same seed.

    Example:
        >>> params = init_params(0)
        >>> sorted(params)
        ['conv_b', 'conv_w', 'dense1_b', 'dense1_w', 'dense2_b', 'dense2_w']
    """
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    scale = lambda fan_in: np.float32(1.0 / np.sqrt(fan_in))
    return {
        "conv_w": jax.random.normal(k1, (3, 3, 1, 8), jnp.float32) * scale(9),
        "conv_b": jnp.zeros((8,), jnp.float32),
        "dense1_w": jax.random.normal(k2, (14 * 14 * 8, 64), jnp.float32) * scale(14 * 14 * 8),
        "dense1_b": jnp.zeros((64,), jnp.float32),
        "dense2_w": jax.random.normal(k3, (64, NUM_CLASSES), jnp.float32) * scale(64),
        "dense2_b": jnp.zeros((NUM_CLASSES,), jnp.float32),
    }


def apply(params: dict, images: jax.Array) -> jax.Array:
    """Logits of shape (batch, 10) for images of shape (batch, 28, 28, 1)."""
    x = jax.lax.conv_general_dilated(images, params["conv_w"], window_strides=(1, 1),
                                     padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = jax.nn.relu(x + params["conv_b"])
    x = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    x = x.reshape((x.shape[0], -1))
    x = jax.nn.gelu(x @ params["dense1_w"] + params["dense1_b"], approximate=False)
    return x @ params["dense2_w"] + params["dense2_b"]


def example_images(batch: int, seed: int = 1) -> np.ndarray:
    """Deterministic synthetic images in [0, 1), float32, shape (batch, 28, 28, 1)."""
    return np.random.default_rng(seed).random((batch, *IMAGE_SHAPE), dtype=np.float32)
