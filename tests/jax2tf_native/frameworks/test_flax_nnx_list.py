"""Flax NNX layers kept in an `nnx.List` / `nnx.Sequential`: their params have int dict keys
(`{"layers": {0: ...}}`), which TF's checkpoints refuse as names; the model must still save,
reload, serve and verify, with Variables named by path (`params/params/layers/0/kernel`)."""
import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx", reason="flax is not installed (pip install "
                                              "'.[frameworks]')")

import tensorflow as tf  # noqa: E402

from tests.jax2tf_native.frameworks.end_to_end import check_model  # noqa: E402


class ListMLP(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(3, 3, rngs=rngs) for _ in range(3)])
        # Sequential's Linears sit at indices 0 and 2 (relu is 1): sparse int keys.
        self.head = nnx.Sequential(nnx.Linear(3, 4, rngs=rngs), nnx.relu,
                                   nnx.Linear(4, 2, rngs=rngs))

    def __call__(self, x):
        for layer in self.layers:
            x = nnx.tanh(layer(x))
        return self.head(x)


def test_nnx_list_of_layers_end_to_end(tmp_path):
    model = ListMLP(nnx.Rngs(0))
    rng = np.random.default_rng(0)
    args = [[rng.standard_normal((b, 3)).astype(np.float32)] for b in (1, 4)]
    paths = [f"layers/{i}/{p}" for i in range(3) for p in ("bias", "kernel")] + [
        f"head/layers/{i}/{p}" for i in (0, 2) for p in ("bias", "kernel")]
    converted, loaded = check_model(
        tmp_path, model, args, ["(b, 3)"],
        expect_trainable=[f"params/params/{p}" for p in paths], expect_non_trainable=[])

    # The restored tree is browsable by the same path, its keys as strings.
    np.testing.assert_array_equal(
        loaded.params["params"]["layers"]["1"]["kernel"].numpy(),
        np.asarray(model.layers[1].kernel[...]))
    np.testing.assert_array_equal(
        loaded.params["params"]["head"]["layers"]["2"]["bias"].numpy(),
        np.asarray(model.head.layers[2].bias[...]))

    # convert_model's tf.Module checkpoints too (fine-tuning in TF); a restored Variable value
    # is what the converted call then uses.
    checkpoint = tf.train.Checkpoint(model=converted).write(str(tmp_path / "ckpt"))
    first = converted.params["params"]["layers"]["0"]["kernel"]
    saved_value = first.numpy()
    first.assign(np.zeros_like(saved_value))
    tf.train.Checkpoint(model=converted).read(checkpoint).assert_consumed()
    np.testing.assert_array_equal(first.numpy(), saved_value)
    np.testing.assert_allclose(converted(*args[1]).numpy(),
                               np.asarray(model(args[1][0])), rtol=1e-5, atol=1e-6)
