"""`quantize_int8`: full-integer TFLite quantization (int8 in and out) of the benchmark's MLP and
CNN (benchmarks/handwritten_pairs.py) saved as plain TF ops gives the operators of the same
models written by hand in Keras, with no float tensor left, and about their accuracy against
float JAX. The long run with more calibration and held-out data:
tools/int8_quantization.py (tools/results/int8_quantization.md)."""
import json

import numpy as np
import pytest

from benchmarks.handwritten_pairs import PAIRS
from saved_model_tools import cli
from saved_model_tools.tflite import int8 as tflite_int8
from saved_model_tools.demo.saved_model import small_saved_model
from tools import int8_quantization


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_int8_quantization_matches_the_hand_written_model(name, tmp_path):
    pair = PAIRS[name]
    reports = int8_quantization.quantized_pair(pair, tmp_path, pair.inputs(16, seed=11))
    ours, keras = reports["ours"], reports["keras"]
    assert ours.ok and keras.ok, (ours, keras)
    assert ours.operators == keras.operators, (ours.operators, keras.operators)
    assert ours.float_tensors == 0 and "DEQUANTIZE" not in ours.operators
    assert ours.input_shape_signatures["input_0"][0] == -1  # the batch stays dynamic
    # Against the JAX outputs recorded with the model: the quantizer's error,
    # close to the hand-written model's on the same held-out inputs.
    (recorded,) = ours.accuracy
    assert recorded.examples >= 2 and recorded.relative_error < 0.1, recorded
    held_out = pair.inputs(8, seed=12)
    ours_acc = int8_quantization.accuracy(ours, pair, held_out)
    keras_acc = int8_quantization.accuracy(keras, pair, held_out)
    assert ours_acc["argmax_agreement"] >= 0.75 and ours_acc["relative_error"] < 0.5, ours_acc
    assert ours_acc["max_abs_error"] <= 2 * keras_acc["max_abs_error"] + 1e-3, \
        (ours_acc, keras_acc)


def test_representative_data_that_does_not_fit_is_refused(tmp_path):
    directory = small_saved_model()
    with pytest.raises(ValueError, match=r"same number \(> 0\) of examples"):
        tflite_int8.quantize_int8(directory, tmp_path / "m.tflite", {"x": np.zeros((0, 3))})
    with pytest.raises(ValueError, match=r"no examples for inputs \['x'\]"):
        tflite_int8.quantize_int8(directory, tmp_path / "m.tflite", {"y": np.zeros((4, 3))})
    assert not list(tmp_path.iterdir())


def test_cli_int8_quantizes_with_representative_npz(tmp_path, capsys):
    directory = small_saved_model()
    data = tmp_path / "calibration.npz"
    np.savez(data, x=np.random.default_rng(0).standard_normal((16, 3)).astype(np.float32))
    out = tmp_path / "m.tflite"
    code = cli.main(["tflite", str(directory), "--out", str(out), "--int8",
                          "--representative", str(data), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and out.is_file() and report["status"] == "quantized", report
    assert report["float_tensors"] == 0 and report["accuracy"][0]["relative_error"] < 0.1
    assert cli.main(["tflite", str(directory), "--out", str(out), "--int8"]) == 2
    assert "--int8 needs --representative" in capsys.readouterr().err
