"""Flax Linen: a causal Transformer over `(b, t)` token ids with a learned position embedding
sliced by the sequence length (needs `t <= 16`), and BatchNorm statistics (`batch_stats`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

nn = pytest.importorskip("flax.linen", reason="flax is not installed (pip install "
                                               "'.[frameworks]')")

from tests.frameworks.end_to_end import check_model  # noqa: E402

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
