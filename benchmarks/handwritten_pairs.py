"""Four models written twice with the same weights: in JAX as a JAX user writes them, and by
hand in Keras (TF backend) as a TF engineer writes them. The Keras model is what a plain graph
(`convert(f, enable_xla=False)`) is measured against (benchmarks/plain_vs_handwritten.py).

- `mlp`: Dense 256->512, exact GELU, Dense 512->512, exact GELU, Dense 512->10.
- `cnn`: two [3x3 conv + bias + ReLU, 2x2/2 max pool], global mean, Dense, softmax (32x32x3).
- `transformer`: a pre-LN block: LayerNorm, 4-head self-attention (Keras MultiHeadAttention),
  residual, LayerNorm, Dense + GELU (tanh form: JAX's default, and the form TF.js can run;
  TF.js has no Erfc kernel) + Dense, residual (64 tokens of width 128).
- `resnet`: a ResNet basic block with batch norm (inference): 3x3 conv, BN, ReLU, 3x3 conv, BN,
  identity shortcut, ReLU (16x16x32).

Every pair is checked against each other by `check_pair` (the Keras model equals JAX to float
rounding), so the benchmark compares two ways of writing one model.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


@dataclasses.dataclass(frozen=True)
class ModelPair:
    """One model in JAX and in Keras.

    Attributes:
      name: the benchmark's name for it.
      apply: `apply(params, x)`, the JAX model.
      params: its parameters (numpy arrays in a dict).
      input_shape: one example's shape (the batch is added in front).
      polymorphic_shape: the `polymorphic_shapes` entry for the input ("(b, ...)").
      keras_model: `keras_model(params)` builds the Keras model holding the same weights.
    """
    name: str
    apply: Callable
    params: dict
    input_shape: tuple[int, ...]
    keras_model: Callable

    @property
    def polymorphic_shape(self) -> str:
        return "(b, " + ", ".join(str(d) for d in self.input_shape) + ")"

    def inputs(self, batch: int, seed: int = 1) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(
            (batch, *self.input_shape)).astype(np.float32)


def _dense(rng, n_in, n_out):
    return ((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
            (0.1 * rng.standard_normal(n_out)).astype(np.float32))


def _conv(rng, k, c_in, c_out, bias=True):
    w = (rng.standard_normal((k, k, c_in, c_out)) / np.sqrt(k * k * c_in)).astype(np.float32)
    return (w, (0.1 * rng.standard_normal(c_out)).astype(np.float32)) if bias else w


def _keras():
    import keras  # noqa: PLC0415  (the Keras side only: KERAS_BACKEND must be set first)
    return keras


# ------------------------------------------------------------------------ MLP with exact GELU

MLP_SIZES = (256, 512, 512, 10)


def mlp_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    params = {}
    for i, (n_in, n_out) in enumerate(zip(MLP_SIZES[:-1], MLP_SIZES[1:])):
        params[f"w{i}"], params[f"b{i}"] = _dense(rng, n_in, n_out)
    return params


def mlp_apply(params: dict, x):
    n_layers = len(MLP_SIZES) - 1
    for i in range(n_layers):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < n_layers - 1:
            x = jax.nn.gelu(x, approximate=False)
    return x


def mlp_keras(params: dict):
    keras = _keras()
    n_layers = len(MLP_SIZES) - 1
    layers = [keras.Input((MLP_SIZES[0],))]
    for i in range(n_layers):
        activation = (lambda t: keras.activations.gelu(t, approximate=False)) \
            if i < n_layers - 1 else None
        layers.append(keras.layers.Dense(MLP_SIZES[i + 1], activation=activation))
    model = keras.Sequential(layers)
    for i, layer in enumerate(model.layers):
        layer.set_weights([params[f"w{i}"], params[f"b{i}"]])
    return model


# ------------------------------------------------------------------------ CNN

CNN_INPUT = (32, 32, 3)
CNN_CHANNELS = (16, 32)


def cnn_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    c1, c2 = CNN_CHANNELS
    p = {}
    p["conv1_w"], p["conv1_b"] = _conv(rng, 3, CNN_INPUT[-1], c1)
    p["conv2_w"], p["conv2_b"] = _conv(rng, 3, c1, c2)
    p["dense_w"], p["dense_b"] = _dense(rng, c2, 10)
    return p


def _conv_nhwc(x, w):
    return jax.lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _max_pool_2x2(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def cnn_apply(params: dict, x):
    for i in (1, 2):
        x = jax.nn.relu(_conv_nhwc(x, params[f"conv{i}_w"]) + params[f"conv{i}_b"])
        x = _max_pool_2x2(x)
    x = jnp.mean(x, axis=(1, 2))
    return jax.nn.softmax(x @ params["dense_w"] + params["dense_b"], axis=-1)


def cnn_keras(params: dict):
    keras = _keras()
    c1, c2 = CNN_CHANNELS
    model = keras.Sequential([
        keras.Input(CNN_INPUT),
        keras.layers.Conv2D(c1, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(c2, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.layers[0].set_weights([params["conv1_w"], params["conv1_b"]])
    model.layers[2].set_weights([params["conv2_w"], params["conv2_b"]])
    model.layers[5].set_weights([params["dense_w"], params["dense_b"]])
    return model


# ------------------------------------------------------------------------ pre-LN transformer

SEQ, D_MODEL, HEADS, D_MLP = 64, 128, 4, 512
LN_EPSILON = 1e-6


def transformer_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    p = {}
    for name in ("q", "k", "v", "o"):
        p[f"w{name}"], p[f"b{name}"] = _dense(rng, D_MODEL, D_MODEL)
    p["w_in"], p["b_in"] = _dense(rng, D_MODEL, D_MLP)
    p["w_out"], p["b_out"] = _dense(rng, D_MLP, D_MODEL)
    for ln in ("ln1", "ln2"):
        p[f"{ln}_scale"] = (1 + 0.1 * rng.standard_normal(D_MODEL)).astype(np.float32)
        p[f"{ln}_bias"] = (0.1 * rng.standard_normal(D_MODEL)).astype(np.float32)
    return p


def _layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPSILON) * scale + bias


def transformer_apply(p: dict, x):
    batch, seq, _ = x.shape
    head_dim = D_MODEL // HEADS
    h = _layer_norm(x, p["ln1_scale"], p["ln1_bias"])
    q, k, v = ((h @ p[f"w{n}"] + p[f"b{n}"]).reshape(batch, seq, HEADS, head_dim)
               for n in ("q", "k", "v"))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q / np.float32(np.sqrt(head_dim)), k)
    attention = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    x = x + attention.reshape(batch, seq, D_MODEL) @ p["wo"] + p["bo"]
    h = _layer_norm(x, p["ln2_scale"], p["ln2_bias"])
    h = jax.nn.gelu(h @ p["w_in"] + p["b_in"])
    return x + h @ p["w_out"] + p["b_out"]


def transformer_keras(p: dict):
    keras = _keras()
    head_dim = D_MODEL // HEADS
    inputs = keras.Input((SEQ, D_MODEL))
    ln1 = keras.layers.LayerNormalization(epsilon=LN_EPSILON)
    attention = keras.layers.MultiHeadAttention(HEADS, head_dim)
    ln2 = keras.layers.LayerNormalization(epsilon=LN_EPSILON)
    dense_in = keras.layers.Dense(D_MLP, activation=lambda t: keras.activations.gelu(
        t, approximate=True))
    dense_out = keras.layers.Dense(D_MODEL)
    h = ln1(inputs)
    x = inputs + attention(h, h)
    outputs = x + dense_out(dense_in(ln2(x)))
    model = keras.Model(inputs, outputs)
    ln1.set_weights([p["ln1_scale"], p["ln1_bias"]])
    ln2.set_weights([p["ln2_scale"], p["ln2_bias"]])
    per_head = lambda w: w.reshape(D_MODEL, HEADS, head_dim)
    attention.set_weights([
        per_head(p["wq"]), p["bq"].reshape(HEADS, head_dim),
        per_head(p["wk"]), p["bk"].reshape(HEADS, head_dim),
        per_head(p["wv"]), p["bv"].reshape(HEADS, head_dim),
        p["wo"].reshape(HEADS, head_dim, D_MODEL), p["bo"]])
    dense_in.set_weights([p["w_in"], p["b_in"]])
    dense_out.set_weights([p["w_out"], p["b_out"]])
    return model


# ------------------------------------------------------------------------ ResNet block

RESNET_INPUT = (16, 16, 32)
BN_EPSILON = 1e-5


def resnet_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    c = RESNET_INPUT[-1]
    p = {}
    for i in (1, 2):
        p[f"conv{i}_w"] = _conv(rng, 3, c, c, bias=False)
        p[f"bn{i}_scale"] = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
        p[f"bn{i}_bias"] = (0.1 * rng.standard_normal(c)).astype(np.float32)
        p[f"bn{i}_mean"] = (0.1 * rng.standard_normal(c)).astype(np.float32)
        p[f"bn{i}_var"] = (1 + 0.1 * rng.random(c)).astype(np.float32)
    return p


def _batch_norm(x, p, i):
    scale = p[f"bn{i}_scale"] * jax.lax.rsqrt(p[f"bn{i}_var"] + BN_EPSILON)
    return (x - p[f"bn{i}_mean"]) * scale + p[f"bn{i}_bias"]


def resnet_apply(p: dict, x):
    h = jax.nn.relu(_batch_norm(_conv_nhwc(x, p["conv1_w"]), p, 1))
    h = _batch_norm(_conv_nhwc(h, p["conv2_w"]), p, 2)
    return jax.nn.relu(h + x)


def resnet_keras(p: dict):
    keras = _keras()
    c = RESNET_INPUT[-1]
    inputs = keras.Input(RESNET_INPUT)
    conv1 = keras.layers.Conv2D(c, 3, padding="same", use_bias=False)
    bn1 = keras.layers.BatchNormalization(epsilon=BN_EPSILON)
    conv2 = keras.layers.Conv2D(c, 3, padding="same", use_bias=False)
    bn2 = keras.layers.BatchNormalization(epsilon=BN_EPSILON)
    h = keras.layers.ReLU()(bn1(conv1(inputs)))
    h = bn2(conv2(h))
    outputs = keras.layers.ReLU()(h + inputs)
    model = keras.Model(inputs, outputs)
    conv1.set_weights([p["conv1_w"]])
    conv2.set_weights([p["conv2_w"]])
    for i, bn in ((1, bn1), (2, bn2)):
        bn.set_weights([p[f"bn{i}_scale"], p[f"bn{i}_bias"], p[f"bn{i}_mean"],
                        p[f"bn{i}_var"]])
    return model


PAIRS = {
    "mlp": ModelPair("mlp", mlp_apply, mlp_params(), (MLP_SIZES[0],), mlp_keras),
    "cnn": ModelPair("cnn", cnn_apply, cnn_params(), CNN_INPUT, cnn_keras),
    "transformer": ModelPair("transformer", transformer_apply, transformer_params(),
                             (SEQ, D_MODEL), transformer_keras),
    "resnet": ModelPair("resnet", resnet_apply, resnet_params(), RESNET_INPUT, resnet_keras),
}


def check_pair(pair: ModelPair, batch: int = 3, rtol: float = 2e-4, atol: float = 2e-5):
    """Raises AssertionError unless the Keras model equals the JAX model on random inputs."""
    x = pair.inputs(batch)
    expected = np.asarray(jax.jit(pair.apply)(pair.params, x))
    got = np.asarray(pair.keras_model(pair.params)(x))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol,
                               err_msg=f"{pair.name}: Keras differs from JAX")
