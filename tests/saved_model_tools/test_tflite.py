"""`tflite`: TF 2.21's converter on XlaCallModule SavedModels, checked against JAX's outputs.

The issue claims the converter handles our SavedModels (a CNN with builtin ops only). Measured:
it legalizes the StableHLO inside XlaCallModule to TFLite builtins, keeps the polymorphic batch
dynamic, and refuses modules with ops that have no TFLite form (here jnp.argmax's variadic
reduce), which SELECT_TF_OPS does not rescue.
"""
import warnings

import jax
import numpy as np
import tensorflow as tf

from saved_model_tools import commands, manifest, tflite
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
    code = commands.main(["tflite", str(argmax_model), "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 4 and not out.exists(), text
    assert "NOT CONVERTED" in text and "mhlo.reduce" in text
    assert "SELECT_TF_OPS: also fails" in text
    assert "conftest.py" in text  # the error line points at the JAX source (argmax_apply)
