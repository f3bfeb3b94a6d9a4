"""`tflite`: TF 2.21's converter on XlaCallModule SavedModels, checked against JAX's outputs.

The issue claims the converter handles our SavedModels (a CNN with builtin ops only). Measured:
it legalizes the StableHLO inside XlaCallModule to TFLite builtins, keeps the polymorphic batch
dynamic, and refuses modules with ops that have no TFLite form (here jnp.argmax's variadic
reduce), which SELECT_TF_OPS does not rescue. The same ops saved as plain TF ops
(enable_xla=False) convert with builtins only.
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

import saved_model_tools
from saved_model_tools import manifest, tflite
from saved_model_tools import cli
from jax2tf_native import example_model


def test_cnn_converts_with_builtins_only_and_matches_jax(cnn_model, cnn_params, tmp_path):
    out = tmp_path / "cnn.tflite"
    report = tflite.convert_to_tflite(cnn_model, out)
    assert report.status == "passed" and report.exit_code == 0, report.format()
    assert report.ops_set == tflite.BUILTINS and report.conversion_errors == ()
    assert report.out_file == str(out) and out.stat().st_size == report.size_bytes
    assert report.input_shape_signatures == {"images": [-1, 28, 28, 1]}
    assert "DEPTHWISE_CONV_2D" in report.tflite_ops or "CONV_2D" in report.tflite_ops
    assert not any(op.startswith("Flex") for op in report.tflite_ops)
    refs = manifest.read(cnn_model).signature("serving_default").references
    assert sorted(c.batch_size for c in report.checks) == sorted(r.batch_size for r in refs)
    assert all(c.expected == "jax reference" for c in report.checks)

    # Independently: the written file, at a batch size never recorded, against JAX itself.
    images = example_model.example_images(5, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = tf.lite.Interpreter(model_path=str(out)).get_signature_runner()
    got = runner(images=images)["logits"]
    want = np.asarray(jax.jit(example_model.apply)(cnn_params, images))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_fixed_batch(cnn_model, tmp_path):
    report = tflite.convert_to_tflite(cnn_model, tmp_path / "b2.tflite", batch_size=2)
    assert report.status == "passed", report.format()
    assert report.fixed_batch == 2 and report.input_shape_signatures == {"images": [2, 28, 28, 1]}
    # Batch 2 was not recorded (1 and 3 were): compared with the SavedModel run in TF.
    assert {(c.batch_size, c.expected) for c in report.checks} == {(2, "tf savedmodel")}


def test_unconvertible_module_is_reported_not_written(argmax_model, tmp_path, capsys):
    out = tmp_path / "argmax.tflite"
    code = cli.main(["tflite", str(argmax_model), "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 4 and not out.exists(), text
    assert "NOT CONVERTED" in text and "mhlo.reduce" in text
    assert "SELECT_TF_OPS: also fails" in text and "enable_xla=False (export --no-xla)" in text
    assert "conftest.py" in text  # the error line points at the JAX source (argmax_apply)


def _ranks(p, x):
    scores = x * p["scale"]
    values, indices = jax.lax.top_k(scores, 3)
    return {"sorted": jnp.sort(scores, axis=-1),
            "order": jnp.argsort(scores, axis=-1, descending=True),
            "top3": values, "top3_at": indices, "label": jnp.argmax(scores, axis=-1),
            "running": jnp.cumsum(scores, axis=-1)}


def _scores(batch, seed):
    """Rounded values (ties) with NaN, infinities and signed zeros in the first row."""
    x = np.round(np.random.default_rng(seed).standard_normal((batch, 6)), 1).astype(np.float32)
    x[0, :5] = [np.nan, -0.0, np.inf, 0.0, -np.inf]
    return x


def test_plain_sort_top_k_argmax_cumsum_convert_with_builtins_only(tmp_path):
    """As XlaCallModule, sort, top_k and argmax fail TFLite's legalization (see the test
    above); as plain TF ops they and cumsum convert with TFLITE_BUILTINS only and a dynamic
    batch, and the interpreter equals JAX, NaN placement and tie order included."""
    params = {"scale": np.float32(2.0)}
    saved_model_tools.save(tmp_path / "m", _ranks, params, [_scores(4, 0)],
                           polymorphic_shapes=["(b, 6)"], enable_xla=False,
                           with_gradient=False)
    out = tmp_path / "m.tflite"
    report = tflite.convert_to_tflite(tmp_path / "m", out)
    assert report.status == "passed", report.format()
    # The builtins-only attempt converted (a fallback to SELECT_TF_OPS leaves its errors).
    assert (report.ops_set, report.conversion_errors) == (tflite.BUILTINS, ()), report.format()
    assert "TOPK_V2" in report.tflite_ops and "CUMSUM" in report.tflite_ops
    assert not [op for op in report.tflite_ops if op.startswith("Flex")], report.tflite_ops
    assert report.input_shape_signatures == {"input_0": [-1, 6]}
    assert {(c.batch_size, c.expected) for c in report.checks} == {
        (1, "jax reference"), (4, "jax reference")}

    # Independently: the written file at an unrecorded batch size against jax.jit itself.
    x = _scores(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = tf.lite.Interpreter(model_path=str(out)).get_signature_runner()
    got = runner(input_0=x)
    want = jax.jit(_ranks)(params, x)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], np.asarray(value), err_msg=name)
        np.testing.assert_array_equal(np.signbit(got[name]), np.signbit(value), err_msg=name)


def _cumprod(p, x):
    return {"y": jnp.cumprod(x, axis=-1)}


def test_plain_cumprod_needs_flex_which_the_bundled_interpreter_lacks(tmp_path):
    """TF's Cumprod has no TFLite builtin: the report names the Flex op, and TF 2.21's
    tf.lite.Interpreter (no Flex delegate linked) cannot run the model it wrote."""
    saved_model_tools.save(tmp_path / "m", _cumprod, {},
                           [_scores(2, 0)], polymorphic_shapes=["(b, 6)"], enable_xla=False,
                           with_gradient=False)
    report = tflite.convert_to_tflite(tmp_path / "m", tmp_path / "m.tflite",
                                      allow_select_tf_ops=True)
    assert report.ops_set == tflite.BUILTINS_AND_SELECT, report.format()
    assert "FlexCumprod" in report.tflite_ops
    assert report.status == "failed" and "Flex delegate" in report.checks[0].detail
    # Issue 37: the builtins-only errors began with `loc(callsite(fused["Cumprod:", ...` and
    # did not say where in the JAX code the op came from.
    line = f"test_tflite.py:{_cumprod.__code__.co_firstlineno + 1}"
    assert report.conversion_errors == (
        f"'tf.Cumprod' op is neither a custom op nor a flex op (from {line} in the JAX code)",
        "failed while converting: 'main': TF Select ops: Cumprod"), report.conversion_errors
