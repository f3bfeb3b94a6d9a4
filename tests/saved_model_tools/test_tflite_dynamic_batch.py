"""Plain SavedModels (`enable_xla=False`) through `tflite` with a dynamic batch, on the two
models that failed in the TFLite interpreter (issue 36): a Flax NNX CNN with 2x2/2 average
pooling (was a 6-D windowed view: "Slice op only supports 1D-5D input arrays") and a BERT-style
encoder whose pooled output is the first token (was "gather index out of bounds": TFLite's
Slice with int64 sizes under a resized batch). Both now run at two batch sizes and equal JAX.

keras-hub's BERT (the model the issue measured) is not built here: its preset download and
size make a slow test; the hand-built encoder has the same pooled-token gather
(`x[:, 0]` after attention, a `dynamic_gather` with a symbolic batch).
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from flax import nnx

import saved_model_tools
from saved_model_tools import manifest, reference_file, tflite

VOCAB, SEQ, WIDTH, HEADS = 50, 8, 32, 4


class _NnxCnn(nnx.Module):
    """The Flax NNX tutorial's CNN, smaller: [conv, relu, avg_pool 2x2/2] twice, linear."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 8, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, kernel_size=(3, 3), rngs=rngs)
        self.linear = nnx.Linear(16 * 4 * 4, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.linear(x.reshape(x.shape[0], -1))


def _nnx_cnn(seed=0) -> _NnxCnn:
    """The CNN with numpy weights: its own initializers' XLA compiles take ~10-30 s on a
    loaded 2-core machine (nnx.eval_shape builds the module without running them)."""
    graph, state = nnx.split(nnx.eval_shape(lambda: _NnxCnn(nnx.Rngs(0))))
    rng = np.random.default_rng(seed)
    state = jax.tree.map(
        lambda s: (0.3 * rng.standard_normal(s.shape)).astype(s.dtype), state)
    return nnx.merge(graph, state)


def _encoder_params(seed=0):
    rng = np.random.default_rng(seed)
    normal = lambda *shape: (0.2 * rng.standard_normal(shape)).astype(np.float32)
    return {"tokens": normal(VOCAB, WIDTH), "positions": normal(SEQ, WIDTH),
            "wq": normal(WIDTH, WIDTH), "wk": normal(WIDTH, WIDTH), "wv": normal(WIDTH, WIDTH),
            "wo": normal(WIDTH, WIDTH), "w_in": normal(WIDTH, 4 * WIDTH),
            "w_out": normal(4 * WIDTH, WIDTH), "pooler": normal(WIDTH, WIDTH),
            "ln_scale": 1 + normal(WIDTH), "ln_bias": normal(WIDTH)}


def _layer_norm(x, p):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * p["ln_scale"] + p["ln_bias"]


def _encoder(p, token_ids, padding_mask):
    """One BERT layer (embeddings, masked self-attention, GELU MLP) and BERT's pooler: tanh of
    a dense layer on the first token."""
    batch, seq = token_ids.shape
    head = WIDTH // HEADS
    x = _layer_norm(p["tokens"][token_ids] + p["positions"][None, :seq], p)
    q, k, v = ((x @ p[w]).reshape(batch, seq, HEADS, head) for w in ("wq", "wk", "wv"))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(head))
    logits = jnp.where(padding_mask[:, None, None, :] > 0, logits, -1e9)
    attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v)
    x = _layer_norm(x + attended.reshape(batch, seq, WIDTH) @ p["wo"], p)
    x = x + jax.nn.gelu(x @ p["w_in"]) @ p["w_out"]
    return jnp.tanh(x[:, 0] @ p["pooler"])


def _assert_runs_like_jax(directory, out, want_fn, inputs_at):
    report = tflite.convert_to_tflite(directory, out)
    assert report.ok, report.format()
    assert report.out_file == str(out) and out.is_file()
    assert all(s[0] == -1 for s in report.input_shape_signatures.values()), report.format()
    runner = tf_lite_runner(out)
    for batch in (1, 5):  # the interpreter resizes the dynamic batch per call
        inputs = inputs_at(batch)
        got = list(runner(**{f"input_{i}": a for i, a in enumerate(inputs)}).values())[0]
        np.testing.assert_allclose(got, np.asarray(want_fn(*inputs)), rtol=1e-4, atol=1e-5)
    return report


def tf_lite_runner(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the interpreter's move to ai_edge_litert
        return tf.lite.Interpreter(model_path=str(path)).get_signature_runner()


def test_nnx_cnn_with_avg_pool_runs_in_tflite_with_dynamic_batch(tmp_path):
    model = _nnx_cnn()
    rng = np.random.default_rng(1)
    images = lambda batch: [rng.standard_normal((batch, 16, 16, 1)).astype(np.float32)]
    saved_model_tools.save_model(tmp_path / "cnn", model, images(3),
                                 polymorphic_shapes=["(b, 16, 16, 1)"], enable_xla=False)
    report = _assert_runs_like_jax(tmp_path / "cnn", tmp_path / "cnn.tflite", model, images)
    # Average pooling is TFLite's own pool (as a hand-written Keras AveragePooling2D).
    assert set(report.tflite_ops) == {"AVERAGE_POOL_2D", "CONV_2D", "FULLY_CONNECTED",
                                      "RESHAPE"}, report.tflite_ops


def test_bert_style_pooled_first_token_runs_in_tflite_with_dynamic_batch(tmp_path):
    params = _encoder_params()
    rng = np.random.default_rng(2)

    def inputs(batch):
        mask = np.ones((batch, SEQ), np.int32)
        mask[:, SEQ - 1 - batch % 3:] = 0
        return [rng.integers(0, VOCAB, (batch, SEQ)).astype(np.int32), mask]

    saved_model_tools.save(tmp_path / "bert", _encoder, params, inputs(3),
                           polymorphic_shapes=[f"(b, {SEQ})", f"(b, {SEQ})"],
                           enable_xla=False, with_gradient=False)
    jitted = jax.jit(_encoder)
    report = _assert_runs_like_jax(tmp_path / "bert", tmp_path / "bert.tflite",
                                   lambda *args: jitted(params, *args), inputs)
    assert "GATHER" in report.tflite_ops  # the embedding lookup and the pooled token


def test_a_tflite_model_that_fails_its_check_is_not_written(tmp_path):
    # Wrong expectations: the references recorded with the model are edited to differ from
    # what the model computes; the converted model is then not written (nor an old one
    # replaced).
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    record = saved_model_tools.save(tmp_path / "m", lambda p, x: x * p["s"],
                                    {"s": np.float32(2.0)}, [x], polymorphic_shapes=["(b, 4)"],
                                    enable_xla=False, with_gradient=False)
    for ref in record.signature("serving_default").references:
        path = manifest.reference_path(tmp_path / "m", ref.file)
        data = dict(reference_file.read(path))
        data = {k: (v + 1 if k.startswith("outputs/") else v) for k, v in data.items()}
        reference_file.write(path, data)
    out = tmp_path / "m.tflite"
    out.write_bytes(b"an older model")
    report = tflite.convert_to_tflite(tmp_path / "m", out)
    assert report.status == "failed" and report.out_file is None, report.format()
    assert out.read_bytes() == b"an older model"
    assert not list(tmp_path.glob("*.partial"))
