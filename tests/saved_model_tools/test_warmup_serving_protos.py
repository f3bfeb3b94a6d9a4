"""The warmup file as TF Serving reads it: parsed with tensorflow-serving-api's own generated
protos (installed without its dependencies, see README), not only with our reader."""
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import saved_model_tools
from saved_model_tools import manifest
from saved_model_tools.write import references

prediction_log_pb2 = pytest.importorskip(
    "tensorflow_serving.apis.prediction_log_pb2",
    reason="tensorflow-serving-api is not installed (pip install --no-deps "
           "'tensorflow-serving-api>=2.21,<2.22')")


def _serving_logs(model):
    logs = []
    for record in tf.data.TFRecordDataset(str(model / manifest.WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        assert log.WhichOneof("log_type") == "predict_log"
        logs.append(log)
    return logs


def _check_against_references(model):
    logs = _serving_logs(model)
    record = manifest.read(model)
    expected = [(sig.name, references.read(model, ref)[0])
                for sig in record.signatures for ref in sig.references]
    assert len(logs) == len(expected) > 0
    for log, (signature_name, inputs) in zip(logs, expected):
        request = log.predict_log.request
        assert request.model_spec.signature_name == signature_name
        assert sorted(request.inputs) == sorted(inputs)
        for name, want in inputs.items():
            got = tf.make_ndarray(request.inputs[name])
            assert got.dtype == want.dtype, name
            np.testing.assert_array_equal(got, want, err_msg=name)
    return logs


def test_cnn_warmup_parses_with_tf_serving_protos(cnn_model):
    logs = _check_against_references(cnn_model)
    assert {log.predict_log.request.model_spec.signature_name for log in logs} == {
        "serving_default", "classify"}


def test_every_dtype_warmup_parses_with_tf_serving_protos(tmp_path):
    inputs = [np.ones((2, 3), ml_dtypes.bfloat16), np.ones((2, 3), np.float16),
              np.ones((2, 3), np.int8), np.ones((2, 3), bool), np.ones((2, 3), np.complex64)]
    saved_model_tools.save(tmp_path / "m", lambda p, *xs: [x for x in xs], {}, inputs,
                           polymorphic_shapes="(b, 3)",
                           input_names=["bf16", "f16", "i8", "flag", "c64"])
    logs = _check_against_references(tmp_path / "m")
    dtypes = {k: v.dtype for k, v in logs[0].predict_log.request.inputs.items()}
    assert dtypes == {"bf16": tf.bfloat16.as_datatype_enum, "f16": tf.float16.as_datatype_enum,
                      "i8": tf.int8.as_datatype_enum, "flag": tf.bool.as_datatype_enum,
                      "c64": tf.complex64.as_datatype_enum}
