"""Benchmark workloads shared by the benchmark scripts: pure JAX, deterministic parameters."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jax2tf_native import example_model

MLP_SIZES = (512, 1024, 1024, 1024, 10)


def mlp_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    params = {}
    for i, (n_in, n_out) in enumerate(zip(MLP_SIZES[:-1], MLP_SIZES[1:])):
        params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        params[f"b{i}"] = np.zeros((n_out,), np.float32)
    return params


def mlp_apply(params: dict, x):
    n_layers = len(MLP_SIZES) - 1
    for i in range(n_layers):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < n_layers - 1:
            x = jax.nn.relu(x)
    return x


def cross_entropy(apply_fn):
    def loss(params, x, labels):
        logits = apply_fn(params, x)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))
    return loss


def mlp_batch(batch: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, MLP_SIZES[0])).astype(np.float32)
    labels = np.eye(MLP_SIZES[-1], dtype=np.float32)[rng.integers(0, MLP_SIZES[-1], batch)]
    return x, labels


def cnn_params(seed: int = 0) -> dict:
    return {k: np.asarray(v) for k, v in example_model.init_params(seed).items()}


def cnn_apply(params: dict, images):
    return example_model.apply(params, images)


def cnn_batch(batch: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    return example_model.example_images(batch, seed), labels
