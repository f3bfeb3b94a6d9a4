"""A pre-LayerNorm transformer block (seq 128, d_model 256, 4 heads, MLP 1024), pure JAX.

Deterministic parameters from a numpy seed, as in `benchmarks.models`; a mean-squared loss for
the gradient workload (the block has no classifier head).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

SEQ = 128
D_MODEL = 256
HEADS = 4
D_MLP = 1024


def params(seed: int = 0) -> dict:
    """Parameters as a dict of float32 numpy arrays, identical for the same seed.

    Example:
        >>> sorted(params())[:3]
        ['b_mlp_in', 'b_mlp_out', 'ln1_bias']
    """
    rng = np.random.default_rng(seed)
    dense = lambda n_in, n_out: (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(
        np.float32)
    return {
        "ln1_scale": np.ones((D_MODEL,), np.float32), "ln1_bias": np.zeros((D_MODEL,), np.float32),
        "w_qkv": dense(D_MODEL, 3 * D_MODEL), "w_out": dense(D_MODEL, D_MODEL),
        "ln2_scale": np.ones((D_MODEL,), np.float32), "ln2_bias": np.zeros((D_MODEL,), np.float32),
        "w_mlp_in": dense(D_MODEL, D_MLP), "b_mlp_in": np.zeros((D_MLP,), np.float32),
        "w_mlp_out": dense(D_MLP, D_MODEL), "b_mlp_out": np.zeros((D_MODEL,), np.float32),
    }


def _layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * scale + bias


def apply(p: dict, x):
    """The block on x of shape (batch, SEQ, D_MODEL); same shape out."""
    batch, seq, _ = x.shape
    head_dim = D_MODEL // HEADS
    h = _layer_norm(x, p["ln1_scale"], p["ln1_bias"])
    qkv = (h @ p["w_qkv"]).reshape(batch, seq, 3, HEADS, head_dim)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(head_dim))
    attention = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    x = x + attention.reshape(batch, seq, D_MODEL) @ p["w_out"]
    h = _layer_norm(x, p["ln2_scale"], p["ln2_bias"])
    h = jax.nn.gelu(h @ p["w_mlp_in"] + p["b_mlp_in"]) @ p["w_mlp_out"] + p["b_mlp_out"]
    return x + h


def loss(p: dict, x, target):
    """Mean squared error of the block's output against `target`."""
    return jnp.mean(jnp.square(apply(p, x) - target))


def batch(size: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), float32, each of shape (size, SEQ, D_MODEL)."""
    rng = np.random.default_rng(seed)
    shape = (size, SEQ, D_MODEL)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))
