"""The Flax Linen models of test_convert_jax.py, and the conversion it runs in a child process
with tensorflowjs on sys.path: `python -m tests.tfjs.convert_jax_models TFJS_PY_DIR OUT_DIR`.

The tensorflowjs recipe (docs/tfjs.md):
- tensorflowjs 4.22 is installed `--no-deps` (its declared deps would put the full `tensorflow`
  beside `tensorflow-cpu`, plus TF-DF, tf-keras, tensorflow-hub, flax and jax pins);
- `tensorflow_decision_forests` is a placeholder module: the converter imports it only to
  register TF-DF's ops, and TF-DF 1.12.0 (the newest) does not load in TF 2.21 ("inference.so:
  undefined symbol _ZN3tsl7strings6StrCatB5cxx11ERKNS0_8AlphaNumE");
- `jax_conversion.jax2tf = jax2tf_native`: its `jax2tf.convert(..., enable_xla=False)` gets plain
  TF ops instead of the peer's XlaCallModule ("Unsupported Ops in the model");
- tensorflowjs's default options: plain graphs have no `Assert` / `StringFormat` ops (shape
  checks live in the signature), so its op check passes without `skip_op_check`.
"""
from __future__ import annotations

import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

SHAPES = {"cnn": (16, 16, 3), "transformer": (8, 16)}


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.gelu(nn.Conv(8, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(8, (3, 3), padding="VALID")(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        return nn.softmax(nn.Dense(10)(x))


class TransformerBlock(nn.Module):
    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=16)(h, h, mask=mask)
        h = nn.LayerNorm()(x)
        h = nn.Dense(16)(nn.gelu(nn.Dense(32)(h)))
        return x + h


MODELS = {"cnn": CNN, "transformer": TransformerBlock}


def model_and_params(name: str):
    model = MODELS[name]()
    x = np.zeros((1, *SHAPES[name]), np.float32)
    return model, model.init(jax.random.PRNGKey(0), x)


def convert_all(tfjs_py_dir: str, out_dir: str) -> None:
    sys.path.append(tfjs_py_dir)
    sys.modules.setdefault("tensorflow_decision_forests",
                           types.ModuleType("tensorflow_decision_forests"))
    import tensorflow as tf
    from tensorflowjs.converters import jax_conversion

    import jax2tf_native
    jax_conversion.jax2tf = jax2tf_native
    for name in MODELS:
        model, params = model_and_params(name)
        dims = SHAPES[name]
        jax_conversion.convert_jax(
            model.apply, params,
            input_signatures=[tf.TensorSpec((None, *dims), tf.float32)],
            polymorphic_shapes=["(b, " + ", ".join(map(str, dims)) + ")"],
            model_dir=f"{out_dir}/{name}")


if __name__ == "__main__":
    convert_all(sys.argv[1], sys.argv[2])
