"""Flax NNX: an MNIST-style CNN (Conv, BatchNorm, Dropout, Linear) through every front door."""
import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx", reason="flax is not installed (pip install "
                                              "'.[frameworks]')")

from tests.jax2tf_native.frameworks.end_to_end import check_model  # noqa: E402


class CNN(nnx.Module):
    def __init__(self, rngs):
        self.conv = nnx.Conv(1, 4, kernel_size=(3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.dropout = nnx.Dropout(0.25, rngs=rngs)
        self.linear = nnx.Linear(4 * 4 * 4, 3, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn(self.conv(x)))
        x = nnx.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        return self.linear(self.dropout(x.reshape(x.shape[0], -1)))


def test_nnx_cnn_end_to_end(tmp_path):
    model = CNN(nnx.Rngs(0))
    # Non-trivial running statistics, so that using them (not batch statistics) shows.
    model.bn.mean[...] = model.bn.mean[...] + 0.3
    model.bn.var[...] = model.bn.var[...] * 2.0
    model.eval()
    rng = np.random.default_rng(0)
    args = [[rng.standard_normal((b, 8, 8, 1)).astype(np.float32)] for b in (1, 5)]
    check_model(tmp_path, model, args, ["(b, 8, 8, 1)"],
                expect_trainable=[f"params/params/{p}" for p in (
                    "bn/bias", "bn/scale", "conv/bias", "conv/kernel", "linear/bias",
                    "linear/kernel")],
                expect_non_trainable=["params/state/bn/mean", "params/state/bn/var"])
