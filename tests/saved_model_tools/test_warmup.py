"""TF Serving warmup file: hand-encoded PredictionLogs, parsed back with independent messages.

tensorflow-serving-api is not installed, so the test builds the TF Serving messages itself from a
FileDescriptorProto typed from tensorflow_serving/apis/{prediction_log,predict,model}.proto (field
numbers as published there), independent of the encoder in saved_model_tools.warmup.
"""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import tensor_pb2

from saved_model_tools import manifest, warmup

F = descriptor_pb2.FieldDescriptorProto


def _field(name, number, type_, type_name=None, repeated=False):
    field = F(name=name, number=number, type=type_,
              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name
    return field


def _add_with_dependencies(pool, file_descriptor, seen):
    for dep in file_descriptor.dependencies:
        _add_with_dependencies(pool, dep, seen)
    if file_descriptor.name not in seen:
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        pool.Add(proto)
        seen.add(file_descriptor.name)


@pytest.fixture(scope="module")
def serving_messages():
    """PredictionLog and friends, with TF Serving's field numbers, in a private pool."""
    pool = descriptor_pool.DescriptorPool()
    _add_with_dependencies(pool, tensor_pb2.DESCRIPTOR, set())
    pkg = ".test_serving"
    file = descriptor_pb2.FileDescriptorProto(
        name="test_serving/prediction_log.proto", package="test_serving", syntax="proto3",
        dependency=["tensorflow/core/framework/tensor.proto"])
    # model.proto: string name = 1; Int64Value version = 2 (omitted); string signature_name = 3;
    file.message_type.add(name="ModelSpec", field=[
        _field("name", 1, F.TYPE_STRING), _field("signature_name", 3, F.TYPE_STRING)])
    # predict.proto: ModelSpec model_spec = 1; map<string, TensorProto> inputs = 2;
    #                repeated string output_filter = 3;
    request = file.message_type.add(name="PredictRequest", field=[
        _field("model_spec", 1, F.TYPE_MESSAGE, pkg + ".ModelSpec"),
        _field("inputs", 2, F.TYPE_MESSAGE, pkg + ".PredictRequest.InputsEntry", repeated=True),
        _field("output_filter", 3, F.TYPE_STRING, repeated=True)])
    entry = request.nested_type.add(name="InputsEntry", field=[
        _field("key", 1, F.TYPE_STRING),
        _field("value", 2, F.TYPE_MESSAGE, ".tensorflow.TensorProto")])
    entry.options.map_entry = True
    # prediction_log.proto: PredictLog { PredictRequest request = 1; PredictResponse response = 2 }
    file.message_type.add(name="PredictLog", field=[
        _field("request", 1, F.TYPE_MESSAGE, pkg + ".PredictRequest")])
    # PredictionLog { LogMetadata log_metadata = 1; oneof log_type { classify_log = 2;
    #   regress_log = 3; multi_inference_log = 4; session_run_log = 5; predict_log = 6; ... } }
    log = file.message_type.add(name="PredictionLog", field=[
        _field("log_metadata", 1, F.TYPE_BYTES), _field("classify_log", 2, F.TYPE_BYTES),
        _field("regress_log", 3, F.TYPE_BYTES), _field("multi_inference_log", 4, F.TYPE_BYTES),
        _field("session_run_log", 5, F.TYPE_BYTES),
        _field("predict_log", 6, F.TYPE_MESSAGE, pkg + ".PredictLog")])
    log.oneof_decl.add(name="log_type")
    for field in log.field[1:]:
        field.oneof_index = 0
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("test_serving.PredictionLog"))


REQUESTS = [
    ("serving_default", {"images": np.linspace(0, 1, 2 * 28 * 28, dtype=np.float32)
                         .reshape(2, 28, 28, 1)}),
    ("serving_default", {"images": np.zeros((5, 28, 28, 1), np.float32)}),
    ("classify", {"ids": np.array([[3, -1]], np.int64), "mask": np.array([True, False]),
                  "words": np.array([b"hello", b"\xffbytes"], dtype=object)}),
]


def test_warmup_file_parses_as_tf_serving_prediction_logs(tmp_path, serving_messages):
    path = warmup.write_warmup_requests(tmp_path / manifest.WARMUP_FILE, REQUESTS)
    records = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    assert len(records) == len(REQUESTS)
    for record, (signature, inputs) in zip(records, REQUESTS):
        log = serving_messages.FromString(record)
        assert log.WhichOneof("log_type") == "predict_log"
        assert [f.name for f, _ in log.ListFields()] == ["predict_log"]
        request = log.predict_log.request
        assert request.model_spec.signature_name == signature
        assert request.model_spec.name == ""  # TF Serving fills in the servable being warmed up
        assert sorted(request.inputs) == sorted(inputs)
        for name, want in inputs.items():
            got = tf.make_ndarray(request.inputs[name])
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_array_equal(got, want)


def test_warmup_round_trip_and_summary(tmp_path):
    path = warmup.write_warmup_requests(tmp_path / "w", REQUESTS)
    back = warmup.read_warmup_requests(path)
    assert [s for s, _ in back] == [s for s, _ in REQUESTS]
    for (_, got), (_, want) in zip(back, REQUESTS):
        assert sorted(got) == sorted(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    assert warmup.summarize(back)[1] == "serving_default(images: float32[5, 28, 28, 1])"
    # Deterministic bytes: the same requests always encode the same way.
    assert warmup.encode_prediction_log(*REQUESTS[2]) == warmup.encode_prediction_log(
        REQUESTS[2][0], dict(reversed(list(REQUESTS[2][1].items()))))


@pytest.mark.parametrize("requests, error, words", [
    ([], ValueError, "no warmup requests"),
    ([("serving_default",)], TypeError, "must be a pair"),
    ([("", {"x": np.ones(1)})], TypeError, "non-empty str"),
    ([("serving_default", {})], TypeError, "non-empty dict"),
    ([("serving_default", {"x": np.array([{"a": 1}], dtype=object)})], TypeError,
     "cannot become a TF tensor"),
    ([("serving_default", {"x": np.ones(1)})] * 1001, ValueError, "at most 1000"),
])
def test_bad_requests_are_rejected_with_a_fix(tmp_path, requests, error, words):
    with pytest.raises(error, match=words) as info:
        warmup.write_warmup_requests(tmp_path / "w", requests)
    assert "Fix:" in str(info.value)
    assert not (tmp_path / "w").exists()


def test_reading_a_corrupt_warmup_file_names_it(tmp_path):
    path = tmp_path / "tf_serving_warmup_requests"
    path.write_bytes(b"not a tfrecord file at all")
    with pytest.raises(ValueError, match="not a valid TFRecord file"):
        warmup.read_warmup_requests(path)
