"""Equinox: a CNN written the Equinox way (unbatched layers, `jax.vmap` over the batch)."""
import jax
import numpy as np
import pytest

eqx = pytest.importorskip("equinox", reason="equinox is not installed (pip install "
                                            "'.[frameworks]')")

from tests.jax2tf_native.frameworks.end_to_end import check_model  # noqa: E402


class CNN(eqx.Module):
    conv: eqx.nn.Conv2d
    mlp: eqx.nn.MLP
    norm: eqx.nn.LayerNorm

    def __init__(self, key):
        conv_key, mlp_key = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 4, kernel_size=3, key=conv_key)
        self.norm = eqx.nn.LayerNorm((4, 6, 6))
        self.mlp = eqx.nn.MLP(4 * 6 * 6, 3, width_size=16, depth=1, key=mlp_key)

    def __call__(self, images):
        def one(image):
            return self.mlp(jax.nn.relu(self.norm(self.conv(image))).reshape(-1))
        return jax.vmap(one)(images)


def test_equinox_cnn_end_to_end(tmp_path):
    model = CNN(jax.random.key(0))
    rng = np.random.default_rng(0)
    args = [[rng.standard_normal((b, 1, 8, 8)).astype(np.float32)] for b in (1, 4)]
    check_model(tmp_path, model, args, ["(b, 1, 8, 8)"],
                expect_trainable=["params/conv/bias", "params/conv/weight",
                                  "params/mlp/layers/0/bias", "params/mlp/layers/0/weight",
                                  "params/mlp/layers/1/bias", "params/mlp/layers/1/weight",
                                  "params/norm/bias", "params/norm/weight"],
                expect_non_trainable=[])
