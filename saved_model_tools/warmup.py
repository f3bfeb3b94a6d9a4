"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests`, written without JAX.

TF Serving replays this file when it loads a model (with `--enable_model_warmup`, the default), so
XLA compiles each XlaCallModule at load time instead of on the first user request. The file is a
TFRecord file; each record is a serialized `tensorflow.serving.PredictionLog` holding a
`PredictLog.request` (a `PredictRequest`).

`tensorflow-serving-api` (which would pull in the full `tensorflow` package) is not a dependency,
so the three outer messages are encoded here by hand with the protobuf wire format. The field
numbers come from tensorflow_serving/apis/{prediction_log,predict,model}.proto:

  PredictionLog  { PredictLog predict_log = 6; }            (in oneof log_type)
  PredictLog     { PredictRequest request = 1; }
  PredictRequest { ModelSpec model_spec = 1; map<string, TensorProto> inputs = 2; }
  ModelSpec      { string signature_name = 3; }
  map entry      { string key = 1; TensorProto value = 2; }  (protobuf's map encoding)

The tensors are TensorFlow's own `TensorProto`s (`tf.make_tensor_proto`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2

# TF Serving reads at most this many warmup records (kMaxNumRecords in saved_model_warmup_util).
MAX_WARMUP_RECORDS = 1000

# Field numbers (see the module docstring).
_PREDICTION_LOG_PREDICT_LOG = 6
_PREDICT_LOG_REQUEST = 1
_PREDICT_REQUEST_MODEL_SPEC = 1
_PREDICT_REQUEST_INPUTS = 2
_MODEL_SPEC_SIGNATURE_NAME = 3
_MAP_KEY = 1
_MAP_VALUE = 2

_WIRE_VARINT = 0
_WIRE_I64 = 1
_WIRE_LEN = 2
_WIRE_I32 = 5


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _len_field(field_number: int, payload: bytes) -> bytes:
    return _varint((field_number << 3) | _WIRE_LEN) + _varint(len(payload)) + payload


def _tensor_proto_bytes(signature_name: str, name: str, array) -> bytes:
    try:
        return tf.make_tensor_proto(np.asarray(array)).SerializeToString()
    except (TypeError, ValueError) as e:
        raise TypeError(f"warmup input {name!r} of signature {signature_name!r} cannot become a "
                        f"TF tensor ({e}). Fix: pass a numeric, bool or string numpy "
                        f"array.") from None


def encode_prediction_log(signature_name: str, inputs: Mapping[str, np.ndarray]) -> bytes:
    """One serialized `PredictionLog` {predict_log {request {model_spec, inputs}}}.

    Example:
        >>> record = encode_prediction_log("serving_default", {"x": np.ones((2, 3), np.float32)})
        >>> decode_prediction_log(record)[0]
        'serving_default'
    """
    model_spec = _len_field(_MODEL_SPEC_SIGNATURE_NAME, signature_name.encode("utf-8"))
    request = _len_field(_PREDICT_REQUEST_MODEL_SPEC, model_spec)
    # Sorted keys: the same inputs always give the same bytes (protobuf leaves map order open).
    for name in sorted(inputs):
        entry = (_len_field(_MAP_KEY, name.encode("utf-8"))
                 + _len_field(_MAP_VALUE,
                              _tensor_proto_bytes(signature_name, name, inputs[name])))
        request += _len_field(_PREDICT_REQUEST_INPUTS, entry)
    predict_log = _len_field(_PREDICT_LOG_REQUEST, request)
    return _len_field(_PREDICTION_LOG_PREDICT_LOG, predict_log)


def _check_request(index: int, request) -> tuple[str, dict]:
    where = f"warmup request #{index}"
    if not (isinstance(request, (tuple, list)) and len(request) == 2):
        raise TypeError(f"{where} must be a pair (signature_name, {{input_name: array}}), got "
                        f"{type(request).__name__} {request!r:.80}. Fix: e.g. "
                        f"('serving_default', {{'images': batch}}).")
    signature_name, inputs = request
    if not isinstance(signature_name, str) or not signature_name:
        raise TypeError(f"{where}: the signature name must be a non-empty str, got "
                        f"{signature_name!r}. Fix: pass the signature key, e.g. 'serving_default'.")
    if not isinstance(inputs, Mapping) or not inputs:
        raise TypeError(f"{where} for signature {signature_name!r}: inputs must be a non-empty "
                        f"dict {{input_name: array}}, got {inputs!r:.80}. Fix: name every input "
                        f"of the signature.")
    for name in inputs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{where} for signature {signature_name!r}: input names must be "
                            f"non-empty str, got {name!r}. Fix: use the signature's input keys.")
    return signature_name, dict(inputs)


def write_warmup_requests(path: str | Path,
                          requests: Iterable[tuple[str, Mapping[str, np.ndarray]]]) -> Path:
    """Writes TF Serving warmup requests (PredictionLog TFRecords) to `path`.

    Args:
      path: the file to write, normally `<saved_model>/assets.extra/tf_serving_warmup_requests`
        (`saved_model_tools.manifest.WARMUP_FILE`). Parent directories are created.
      requests: pairs (signature_name, {input_name: array}); each becomes one PredictRequest.
        Use the signature's input keys and dtypes, and one request per batch size worth
        compiling for (XLA compiles per shape).

    Returns:
      The path written.

    Raises:
      TypeError: a request is not (str, non-empty dict of str -> array), or an array has a dtype
        TF has no tensor type for.
      ValueError: no requests, or more than TF Serving reads (1000).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "assets.extra" / "tf_serving_warmup_requests"
        >>> write_warmup_requests(  # returns the path written
        ...     path,
        ...     [("serving_default", {"images": np.zeros((1, 28, 28, 1), np.float32)}),
        ...      ("serving_default", {"images": np.zeros((8, 28, 28, 1), np.float32)})])
        PosixPath('.../assets.extra/tf_serving_warmup_requests')
        >>> len(read_warmup_requests(path))
        2
    """
    checked = [_check_request(i, r) for i, r in enumerate(requests)]
    if not checked:
        raise ValueError("no warmup requests given; TF Serving would warm up nothing. Fix: pass "
                         "at least one (signature_name, {input_name: array}) pair.")
    if len(checked) > MAX_WARMUP_RECORDS:
        raise ValueError(f"{len(checked)} warmup requests given, but TF Serving reads at most "
                         f"{MAX_WARMUP_RECORDS}. Fix: keep one request per signature and batch "
                         f"size.")
    records = [encode_prediction_log(sig, inputs) for sig, inputs in checked]

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


# ---- reading back (for `inspect` and `verify`; tests decode with independent descriptors) ----

def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, object]]:
    """(field_number, wire_type, value) for each field; LEN values are bytes."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == _WIRE_VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == _WIRE_LEN:
            length, pos = _read_varint(data, pos)
            if pos + length > len(data):
                raise ValueError(f"field {number} runs past the end of its message")
            value, pos = data[pos:pos + length], pos + length
        elif wire == _WIRE_I64:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == _WIRE_I32:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire} for field {number}")
        out.append((number, wire, value))
    return out


def _only_len(data: bytes, number: int) -> list[bytes]:
    return [v for n, w, v in _fields(data) if n == number and w == _WIRE_LEN]


def decode_prediction_log(record: bytes) -> tuple[str, dict[str, np.ndarray]]:
    """(signature_name, {input_name: array}) of one serialized PredictionLog with a predict_log.

    Raises:
      ValueError: the record is not a PredictionLog holding a PredictLog request.
    """

    logs = _only_len(record, _PREDICTION_LOG_PREDICT_LOG)
    if not logs:
        raise ValueError("record is not a PredictionLog with a predict_log (field 6)")
    requests = _only_len(logs[-1], _PREDICT_LOG_REQUEST)
    if not requests:
        raise ValueError("predict_log has no request")
    request = requests[-1]
    signature_name = ""
    for spec in _only_len(request, _PREDICT_REQUEST_MODEL_SPEC):
        for value in _only_len(spec, _MODEL_SPEC_SIGNATURE_NAME):
            signature_name = value.decode("utf-8")
    inputs = {}
    for entry in _only_len(request, _PREDICT_REQUEST_INPUTS):
        keys, values = _only_len(entry, _MAP_KEY), _only_len(entry, _MAP_VALUE)
        name = keys[-1].decode("utf-8") if keys else ""
        tensor = tensor_pb2.TensorProto.FromString(values[-1] if values else b"")
        inputs[name] = tf.make_ndarray(tensor)
    return signature_name, inputs


def read_warmup_requests(path: str | Path) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The requests in a warmup file, as (signature_name, {input_name: array}) pairs.

    Raises:
      FileNotFoundError: no file at `path`.
      ValueError: the file is not TFRecords of PredictionLogs with predict requests (the message
        names the record).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "tf_serving_warmup_requests"
        >>> _ = write_warmup_requests(
        ...     path, [("serving_default", {"images": np.zeros((1, 28, 28, 1), np.float32)})])
        >>> [(sig, {k: v.shape for k, v in inputs.items()})
        ...  for sig, inputs in read_warmup_requests(path)]
        [('serving_default', {'images': (1, 28, 28, 1)})]
    """

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no warmup file at {path}")
    out: list[tuple[str, dict[str, np.ndarray]]] = []
    try:
        for index, record in enumerate(tf.data.TFRecordDataset(str(path)).as_numpy_iterator()):
            try:
                out.append(decode_prediction_log(record))
            except ValueError as e:
                raise ValueError(f"{path}: record #{index} is not a TF Serving PredictionLog "
                                 f"predict request ({e}). Fix: rewrite the file with "
                                 f"saved_model_tools.warmup.write_warmup_requests.") from None
    except tf.errors.DataLossError as e:
        raise ValueError(f"{path} is not a valid TFRecord file ({e.message.splitlines()[0]}). "
                         f"Fix: rewrite it with write_warmup_requests.") from None
    return out


def summarize(requests: Sequence[tuple[str, Mapping[str, np.ndarray]]]) -> list[str]:
    """One line per request: signature and input shapes/dtypes (for reports)."""
    lines = []
    for sig, inputs in requests:
        shapes = ", ".join(f"{k}: {np.asarray(v).dtype}{list(np.shape(v))}"
                           for k, v in sorted(inputs.items()))
        lines.append(f"{sig}({shapes})")
    return lines
