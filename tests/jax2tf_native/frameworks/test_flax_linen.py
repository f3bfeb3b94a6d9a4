"""Flax Linen: a causal Transformer over `(b, t)` token ids with a learned position embedding
sliced by the sequence length (needs `t <= 16`), and BatchNorm statistics (`batch_stats`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

nn = pytest.importorskip("flax.linen", reason="flax is not installed (pip install "
                                               "'.[frameworks]')")

from tests.jax2tf_native.frameworks.end_to_end import check_model  # noqa: E402

MAX_LEN, VOCAB, WIDTH = 16, 11, 8


class CausalTransformer(nn.Module):
    @nn.compact
    def __call__(self, inputs, train: bool = False):
        ids, mask = inputs["token_ids"], inputs["padding_mask"]
        t = ids.shape[1]
        pos_emb = self.param("pos_emb", nn.initializers.normal(0.02), (MAX_LEN, WIDTH))
        x = nn.Embed(VOCAB, WIDTH)(ids) + pos_emb[None, :t]
        attention_mask = nn.combine_masks(nn.make_causal_mask(ids),
                                          nn.make_attention_mask(mask, mask))
        x = x + nn.MultiHeadDotProductAttention(num_heads=2)(nn.LayerNorm()(x),
                                                        mask=attention_mask)
        x = x + nn.Dense(WIDTH)(nn.gelu(nn.Dense(2 * WIDTH)(nn.LayerNorm()(x))))
        x = nn.BatchNorm(use_running_average=not train)(x)
        return {"logits": nn.Dense(VOCAB)(x)}


def _inputs(b, t, seed):
    rng = np.random.default_rng(seed)
    mask = np.ones((b, t), bool)
    mask[:, t - 1:] = False
    return {"token_ids": rng.integers(0, VOCAB, (b, t)).astype(np.int32),
            "padding_mask": mask}


def test_linen_causal_transformer_end_to_end(tmp_path):
    module = CausalTransformer()
    variables = module.init(jax.random.key(0), _inputs(1, 4, 0))
    variables = {"params": variables["params"],
                 "batch_stats": jax.tree.map(lambda s: s + 0.5, variables["batch_stats"])}
    args = [[_inputs(2, 5, 1)], [_inputs(3, MAX_LEN, 2)]]
    _, loaded = check_model(
        tmp_path, module, args, [{"token_ids": "(b, t)", "padding_mask": "(b, t)"}],
        model_kwargs={"variables": variables},
        polymorphic_constraints=[f"t <= {MAX_LEN}"],
        expect_trainable=[f"params/params/{'/'.join(str(k.key) for k in path)}"
                          for path, _ in jax.tree_util.tree_flatten_with_path(
                              variables["params"])[0]],
        expect_non_trainable=["params/batch_stats/BatchNorm_0/mean",
                              "params/batch_stats/BatchNorm_0/var"],
        rtol=2e-5, atol=2e-5)
    # The position embedding is sliced by t: one signature serves t = 1 .. 16.
    serve = loaded.signatures["serving_default"]
    inputs = _inputs(1, 1, 3)
    got = serve(**inputs)["logits"].numpy()
    np.testing.assert_allclose(got, module.apply(variables, inputs)["logits"], rtol=2e-5,
                               atol=2e-5)


class HalfPrecisionBlock(nn.Module):
    """The Flax ImageNet example's half precision: bfloat16 compute and parameters."""

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(4, (3, 3), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(x)
        x = nn.BatchNorm(use_running_average=True, dtype=jnp.bfloat16,
                         param_dtype=jnp.bfloat16)(x)
        return nn.Dense(3, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(nn.relu(x).mean((1, 2)))


def test_linen_bfloat16_model_saves_and_verifies(tmp_path):
    import saved_model_tools
    import tensorflow as tf
    from saved_model_tools import verify

    module = HalfPrecisionBlock()
    images = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(jnp.bfloat16)
    variables = module.init(jax.random.key(0), images)
    record = saved_model_tools.save_model(tmp_path / "m", module, [images], variables=variables,
                                          polymorphic_shapes=["(b, 6, 6, 3)"])
    assert record.signatures[0].outputs[0].dtype == "bfloat16"
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    assert {v.dtype for v in loaded.trainable_variables} == {tf.bfloat16}
    assert sorted(v.name for v in loaded.non_trainable_variables) == [
        "params/batch_stats/BatchNorm_0/mean:0", "params/batch_stats/BatchNorm_0/var:0"]
    got = loaded.signatures["serving_default"](input_0=tf.constant(images))["output_0"]
    np.testing.assert_array_equal(got.numpy(), np.asarray(module.apply(variables, images)))
    report = verify.verify(tmp_path / "m")
    assert report.ok, report.format()
