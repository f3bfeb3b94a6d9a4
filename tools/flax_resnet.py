"""The Flax imagenet example's ResNet (its `ResNetBlock` and `ResNet` modules, BatchNorm
included), for bfloat16 checks of the plain lowering: tools/plain_bf16_resnet.py and its CI slice
tests/saved_model_tools/test_plain_bf16_resnet.py.

Written here from the example's structure (nothing is downloaded): a 7x7/2 stem convolution,
BatchNorm, ReLU and 3x3/2 SAME max pooling, then stages of two-convolution blocks (the first
of each stage after the first with stride 2 and a 1x1 projection), a spatial mean and a dense
layer, all computed in `dtype` with float32 parameters.
"""
from __future__ import annotations

import functools
import zlib
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class ResNetBlock(nn.Module):
    filters: int
    conv: Any
    norm: Any
    act: Callable
    strides: tuple = (1, 1)

    @nn.compact
    def __call__(self, x):
        residual = x
        y = self.conv(self.filters, (3, 3), self.strides)(x)
        y = self.norm()(y)
        y = self.act(y)
        y = self.conv(self.filters, (3, 3))(y)
        y = self.norm(scale_init=nn.initializers.zeros_init())(y)
        if residual.shape != y.shape:
            residual = self.conv(self.filters, (1, 1), self.strides, name="conv_proj")(residual)
            residual = self.norm(name="norm_proj")(residual)
        return self.act(residual + y)


class ResNet(nn.Module):
    stage_sizes: Sequence[int]
    num_classes: int
    num_filters: int = 64
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, train: bool = True):
        conv = functools.partial(nn.Conv, use_bias=False, dtype=self.dtype)
        norm = functools.partial(nn.BatchNorm, use_running_average=not train, momentum=0.9,
                                 epsilon=1e-5, dtype=self.dtype)
        x = conv(self.num_filters, (7, 7), (2, 2), padding=[(3, 3), (3, 3)],
                 name="conv_init")(x)
        x = norm(name="bn_init")(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for i, block_size in enumerate(self.stage_sizes):
            for j in range(block_size):
                strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                x = ResNetBlock(self.num_filters * 2 ** i, strides=strides, conv=conv,
                                norm=norm, act=nn.relu)(x)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dense(self.num_classes, dtype=self.dtype)(x)
        return jnp.asarray(x, self.dtype)


def example(stage_sizes=(2, 2, 2, 2), num_filters=64, image=32, batch=2, seed=0,
            dtype=jnp.bfloat16):
    """`(apply, params, images)`: `apply(params, images)` is the model in inference mode
    (BatchNorm with running statistics), params are float32. The BatchNorm scales, biases and
    statistics are perturbed (deterministically) from their initial values, so that every
    layer, the second convolution of each block included, shapes the output and gradients."""
    model = ResNet(stage_sizes=list(stage_sizes), num_classes=10, num_filters=num_filters,
                   dtype=dtype)
    images = np.asarray(jax.random.normal(jax.random.PRNGKey(seed + 1),
                                          (batch, image, image, 3), jnp.float32))
    variables = model.init(jax.random.PRNGKey(seed), images, train=False)

    def perturbed(path, value):
        if value.ndim != 1:
            return value
        key = jax.random.PRNGKey(zlib.crc32(jax.tree_util.keystr(path).encode()) + seed)
        return value + 0.1 * jax.random.normal(key, value.shape, value.dtype)

    params = jax.tree_util.tree_map_with_path(perturbed, variables["params"])
    stats = jax.tree.map(jnp.abs, jax.tree_util.tree_map_with_path(
        perturbed, variables["batch_stats"]))

    def apply(params, images):
        return model.apply({"params": params, "batch_stats": stats}, images, train=False)

    return apply, params, images
