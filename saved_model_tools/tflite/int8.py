"""`quantize_int8`: TFLite full-integer quantization of a SavedModel (int8 weights, activations,
inputs and outputs), with its operators and its accuracy against the recorded JAX outputs.

The converter is set up as TF's guide for integer-only accelerators says:
`optimizations=[DEFAULT]`, a representative dataset, `supported_ops=[TFLITE_BUILTINS_INT8]`
and int8 `inference_input_type` / `inference_output_type`. With builtins-int8 only, a model
either quantizes whole or does not convert: no float island (DEQUANTIZE ... QUANTIZE around a
float op) can hide in it. A plain SavedModel (`enable_xla=False`) goes in as for
`convert_to_tflite`, without its NaN guards (tf_ops.nan_guards): measured on the MLP and CNN of
benchmarks/handwritten_pairs.py, ours quantize to the same operators as the same models written
in Keras (tools/results/int8_quantization.json, tools/int8_quantization.py).

Quantization changes values by design, so there is no pass/fail tolerance: the report states
the error against the JAX outputs recorded with the model (dequantized int8 outputs), and the
agreement of the last axis' argmax (a classifier's prediction). A model the interpreter cannot
run is not written.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import json
import os
import re
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np
import tensorflow as tf

from saved_model_tools import manifest as manifest_lib
from saved_model_tools import reference_file
from saved_model_tools.inspect.stablehlo import native_stderr_captured
from saved_model_tools.tflite.convert import without_nan_guards
from saved_model_tools.tflite.converter_errors import converter_error_lines

_ANALYZER_OP = re.compile(r"^\s*Op#\d+ (\w+)\(", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Int8Accuracy:
    """One output of the int8 model against JAX's recorded values.

    Attributes:
      output: the output's name.
      examples: how many examples (rows) were compared.
      max_abs_error: the largest |int8 model (dequantized) - JAX|.
      relative_error: `max_abs_error` / the largest |JAX value| (0 where all are 0).
      argmax_agreement: the fraction of rows whose last-axis argmax equals JAX's (None for
        outputs with a last axis of size 1 or rank < 2).
    """
    output: str
    examples: int
    max_abs_error: float
    relative_error: float
    argmax_agreement: float | None


@dataclasses.dataclass(frozen=True)
class Int8Report:
    """The result of `quantize_int8`.

    Attributes:
      saved_model_dir: the SavedModel quantized.
      signature: the signature quantized.
      out_file: the .tflite written; None when it did not convert or did not run.
      status: "quantized" (converted and ran), "not-converted" (see `conversion_errors`) or
        "failed" (converted, but the interpreter raised: see `run_error`).
      operators: {TFLite operator: count} over the model.
      float_tensors: tensors of the model held in float32 (0 for full-integer models).
      input_shape_signatures: {input: shape with -1 for a dynamic dimension}.
      accuracy: one per output, against the JAX outputs recorded with the model (empty when
        the model has no references).
      conversion_errors: the converter's distinct error lines, when it refused.
      run_error: the interpreter's error, when it raised.
    """
    saved_model_dir: str
    signature: str
    out_file: str | None
    status: str
    operators: dict
    float_tensors: int
    input_shape_signatures: dict
    accuracy: tuple[Int8Accuracy, ...]
    conversion_errors: tuple[str, ...] = ()
    run_error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "quantized"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"


def operator_counts(model: bytes) -> dict:
    """{operator: count} over every subgraph of a .tflite flatbuffer."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        tf.lite.experimental.Analyzer.analyze(model_content=model)
    return dict(sorted(collections.Counter(_ANALYZER_OP.findall(text.getvalue())).items()))


def run_int8(model: bytes, inputs: Mapping[str, np.ndarray],
             signature: str = "serving_default") -> dict:
    """Runs an int8 model on float inputs: each input quantized with its scale and zero
    point, each int8 output dequantized. Returns {output: float32 array}.

    Example:
        >>> # report = quantize_int8(...); run_int8(Path(report.out_file).read_bytes(), {...})
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf.lite.Interpreter's move to ai_edge_litert
        runner = tf.lite.Interpreter(model_content=model).get_signature_runner(signature)
    feed = {}
    for name, detail in runner.get_input_details().items():
        x = np.asarray(inputs[name])
        scale, zero = detail["quantization"]
        if detail["dtype"] == np.int8 and scale:
            x = np.clip(np.round(x / scale + zero), -128, 127)
        feed[name] = x.astype(detail["dtype"])
    got = runner(**feed)
    out = {}
    for name, detail in runner.get_output_details().items():
        scale, zero = detail["quantization"]
        value = got[name]
        out[name] = ((value.astype(np.float32) - zero) * scale if scale
                     else value.astype(np.float32))
    return out


def _converter(directory: Path, signature: str, samples: list) -> tf.lite.TFLiteConverter:
    converter = tf.lite.TFLiteConverter.from_saved_model(str(directory),
                                                         signature_keys=[signature])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter(samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter


def _samples(representative, names: list[str]) -> list[dict]:
    """One {input: batch-of-1 float32 array} per example of the representative data."""
    if isinstance(representative, (str, os.PathLike)):
        with np.load(representative) as data:
            representative = {k: data[k] for k in data.files}
    if not isinstance(representative, Mapping):
        if len(names) != 1:
            raise ValueError(f"representative: the signature has inputs {names}; pass a dict "
                             f"{{input name: examples}}.")
        representative = {names[0]: representative}
    missing = sorted(set(names) - set(representative))
    if missing:
        raise ValueError(f"representative: no examples for inputs {missing} (the signature's "
                         f"inputs are {names}).")
    arrays = {n: np.asarray(representative[n]) for n in names}
    counts = {n: a.shape[0] if a.ndim else 0 for n, a in arrays.items()}
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise ValueError(f"representative: every input needs the same number (> 0) of "
                         f"examples along axis 0, got {counts}.")
    return [{n: a[i:i + 1] for n, a in arrays.items()} for i in range(counts[names[0]])]


def _accuracy(model: bytes, directory: Path, signature: str) -> tuple[Int8Accuracy, ...]:
    recorded = manifest_lib.read(directory)
    if recorded is None or signature not in {s.name for s in recorded.signatures}:
        return ()
    rows = collections.defaultdict(lambda: ([], []))  # output -> (got, want) per reference
    for ref in recorded.signature(signature).references:
        data = reference_file.read(manifest_lib.reference_path(directory, ref.file))
        inputs = {k[len("inputs/"):]: v for k, v in data.items() if k.startswith("inputs/")}
        got = run_int8(model, inputs, signature)
        for key, want in data.items():
            if key.startswith("outputs/"):
                rows[key[len("outputs/"):]][0].append(got[key[len("outputs/"):]])
                rows[key[len("outputs/"):]][1].append(np.asarray(want, np.float32))
    found = []
    for name, (got, want) in sorted(rows.items()):
        got, want = np.concatenate(got), np.concatenate(want)
        error = float(np.max(np.abs(got - want))) if want.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        agree = None
        if want.ndim >= 2 and want.shape[-1] > 1:
            agree = float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))
        found.append(Int8Accuracy(name, int(want.shape[0]) if want.ndim else 1, error,
                                  error / scale if scale else 0.0, agree))
    return tuple(found)


def quantize_int8(saved_model_dir: str | Path, out_file: str | Path, representative, *,
                  signature: str = "serving_default") -> Int8Report:
    """Quantizes one signature to a full-integer (int8 in and out) .tflite file.

    Args:
      saved_model_dir: the SavedModel directory (plain graphs, `enable_xla=False`, quantize
        with builtins; an XlaCallModule graph goes through TF's StableHLO path).
      out_file: the .tflite file to write (replaced atomically; not written on failure).
      representative: calibration inputs: {input name: float examples along axis 0}, one
        array for a signature with one input, or the path of an .npz file holding such a
        dict (a few hundred typical inputs).
      signature: the signature to quantize.

    Returns:
      An `Int8Report`: operators, float tensors left, accuracy against the recorded JAX
      outputs.

    Raises:
      KeyError: no such signature. ValueError: representative data that does not fit.

    Example:
        >>> import tempfile
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> directory = small_saved_model()
        >>> x = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
        >>> report = quantize_int8(directory, Path(tempfile.mkdtemp()) / "m.tflite", x)
        >>> report.status, report.float_tensors
        ('quantized', 0)
    """
    directory = Path(saved_model_dir)
    loaded = tf.saved_model.load(str(directory))
    if signature not in loaded.signatures:
        raise KeyError(f"no signature {signature!r} in {directory}; it has "
                       f"{sorted(loaded.signatures)}. Fix: pass signature= one of those.")
    names = sorted(loaded.signatures[signature].structured_input_signature[1])
    samples = _samples(representative, names)
    try:
        with native_stderr_captured(), contextlib.redirect_stdout(io.StringIO()), \
                without_nan_guards(directory) as plain_dir:
            model = _converter(plain_dir, signature, samples).convert()
    except Exception as e:  # ConverterError, or a quantizer failure raised another way
        return Int8Report(str(directory), signature, None, "not-converted", {}, 0, {}, (),
                          converter_error_lines(e))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interpreter = tf.lite.Interpreter(model_content=model)
    shapes = {n: [int(d) for d in detail["shape_signature"]] for n, detail in
              interpreter.get_signature_runner(signature).get_input_details().items()}
    floats = sum(t["dtype"] == np.float32 for t in interpreter.get_tensor_details())
    report = dict(saved_model_dir=str(directory), signature=signature, operators=operator_counts(
        model), float_tensors=int(floats), input_shape_signatures=shapes)
    try:
        run_int8(model, samples[0], signature)
        accuracy = _accuracy(model, directory, signature)
    except Exception as e:  # the interpreter's RuntimeError: reported, nothing written
        return Int8Report(out_file=None, status="failed", accuracy=(),
                          run_error=f"{type(e).__name__}: {str(e).strip()[:300]}", **report)
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_bytes(model)
    os.replace(partial, out)
    return Int8Report(out_file=str(out), status="quantized", accuracy=accuracy, **report)
