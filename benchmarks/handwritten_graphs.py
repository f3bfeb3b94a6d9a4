"""The two sides of one `handwritten_pairs` model in TF and TFLite: ours (the plain graph of
`convert(f, enable_xla=False)`) and the hand-written Keras model, built the way each is used.

- `tf_functions`: both as `tf.function`s with one input signature (`[None, ...]`), parameters
  as `tf.Variable`s; `compute_ops` counts what each graph computes.
- `saved_models`: ours through `saved_model_tools.save(..., enable_xla=False,
  with_gradient=False)`, the Keras model through `model.export` (Keras 3's SavedModel).
- `tflite_models`: ours through `saved_model_tools.tflite.convert_to_tflite` (the documented
  route, docs/guides/tflite.md), the Keras SavedModel through TF's `TFLiteConverter` with
  default options (builtins only); `tflite_ops` counts the flatbuffer's operators and
  `TfliteRunner` times `interpreter.invoke()`.

Used by benchmarks/plain_vs_handwritten.py.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import re
import warnings
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
import saved_model_tools
from benchmarks.handwritten_pairs import ModelPair
from saved_model_tools import tflite as tflite_lib

# Bookkeeping, not computation: arguments, results, constants, variable reads and calls.
NOT_COMPUTE = frozenset({
    "Placeholder", "Const", "Identity", "IdentityN", "NoOp", "ReadVariableOp", "VarHandleOp",
    "_Arg", "_Retval", "PartitionedCall", "StatefulPartitionedCall"})
_ANALYZER_OP = re.compile(r"^\s*Op#\d+ (\w+)\(", re.MULTILINE)
# Ours against jax.jit: the plain graph is built from JAX's own program.
OURS_RTOL = OURS_ATOL = 1e-5
# The Keras model against jax.jit: another program for the same math (handwritten_pairs).
KERAS_RTOL, KERAS_ATOL = 2e-4, 2e-5


@dataclasses.dataclass
class TfSides:
    """One model's `tf.function`s and its JAX reference.

    Attributes:
      pair: the model.
      ours: `tf.function` of `convert(apply, enable_xla=False)` over `tf.Variable` parameters.
      keras: `tf.function` calling the Keras model with `training=False`.
      keras_model: the Keras model itself (saved by `saved_models`).
      jitted: `jax.jit(apply)` with the parameters bound.
    """
    pair: ModelPair
    ours: Callable
    keras: Callable
    keras_model: object
    jitted: Callable


def _spec(pair: ModelPair) -> tf.TensorSpec:
    return tf.TensorSpec([None, *pair.input_shape], tf.float32)


def tf_functions(pair: ModelPair) -> TfSides:
    """Both sides as `tf.function`s with the same input signature (a `None` batch)."""
    variables = {k: tf.Variable(v) for k, v in pair.params.items()}
    converted = jax2tf_native.convert(
        pair.apply, polymorphic_shapes=[None, pair.polymorphic_shape], enable_xla=False)
    ours = tf.function(lambda x: converted(variables, x), input_signature=[_spec(pair)],
                       autograph=False)
    model = pair.keras_model(pair.params)
    keras = tf.function(lambda x: model(x, training=False), input_signature=[_spec(pair)])
    params = jax.device_put(pair.params)
    apply = jax.jit(pair.apply)
    return TfSides(pair, ours, keras, model, lambda x: apply(params, x))


def compute_ops(fn) -> collections.Counter:
    """Op type -> count over a `tf.function`'s graph and its function library, bookkeeping
    ops (`NOT_COMPUTE`) left out."""
    graph_def = fn.get_concrete_function().graph.as_graph_def()
    counts = collections.Counter(n.op for n in graph_def.node if n.op not in NOT_COMPUTE)
    for function in graph_def.library.function:
        counts.update(n.op for n in function.node_def if n.op not in NOT_COMPUTE)
    return counts


def check_tf(sides: TfSides, batches=(1, 3)) -> dict:
    """Checks both `tf.function`s against `jax.jit` (ours within 1e-5, Keras within the pair's
    tolerance); returns the largest absolute differences. Raises AssertionError."""
    worst = {"ours": 0.0, "keras": 0.0}
    for batch in batches:
        x = sides.pair.inputs(batch, seed=batch)
        want = np.asarray(sides.jitted(x))
        for side, fn, rtol, atol in (("ours", sides.ours, OURS_RTOL, OURS_ATOL),
                                     ("keras", sides.keras, KERAS_RTOL, KERAS_ATOL)):
            got = fn(tf.constant(x)).numpy()
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=(
                f"{sides.pair.name} b{batch}: {side} tf.function differs from jax.jit"))
            worst[side] = max(worst[side], float(np.max(np.abs(got - want))))
    return worst


def saved_models(sides: TfSides, out: Path) -> tuple[Path, Path]:
    """(ours, Keras) SavedModel directories under `out`."""
    pair = sides.pair
    ours, keras = out / f"{pair.name}_ours", out / f"{pair.name}_keras"
    saved_model_tools.save(ours, pair.apply, pair.params, [pair.inputs(2)],
                           polymorphic_shapes=[pair.polymorphic_shape], enable_xla=False,
                           with_gradient=False)
    with contextlib.redirect_stdout(io.StringIO()):   # export prints the endpoint's signature
        sides.keras_model.export(str(keras), format="tf_saved_model", verbose=False)
    return ours, keras


def tflite_models(ours_dir: Path, keras_dir: Path, out: Path) -> dict:
    """{"ours": bytes or None, "keras": bytes or None, "errors": {side: text}}."""
    result = {"ours": None, "keras": None, "errors": {}}
    ours_file = out / f"{ours_dir.name}.tflite"
    report = tflite_lib.convert_to_tflite(ours_dir, ours_file)
    if report.ok:
        result["ours"] = ours_file.read_bytes()
    else:
        result["errors"]["ours"] = report.format()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            result["keras"] = tf.lite.TFLiteConverter.from_saved_model(str(keras_dir)).convert()
    except Exception as e:  # the converter's failure is a finding, reported per model
        result["errors"]["keras"] = f"{type(e).__name__}: {str(e).strip()[:600]}"
    return result


def tflite_ops(model: bytes) -> collections.Counter:
    """Operator name -> count over every subgraph of a .tflite flatbuffer."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        tf.lite.experimental.Analyzer.analyze(model_content=model)
    return collections.Counter(_ANALYZER_OP.findall(text.getvalue()))


class TfliteRunner:
    """One interpreter with its input resized to `x.shape` and set: `invoke()` is what is timed,
    `output()` reads the result."""

    def __init__(self, model: bytes, x: np.ndarray):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # tf.lite.Interpreter points to ai_edge_litert
            self.interpreter = tf.lite.Interpreter(model_content=model)
        (given,) = self.interpreter.get_input_details()
        self.interpreter.resize_tensor_input(given["index"], list(x.shape), strict=False)
        self.interpreter.allocate_tensors()
        self.interpreter.set_tensor(given["index"], x)
        (self._output,) = self.interpreter.get_output_details()
        self.invoke = self.interpreter.invoke

    def output(self) -> np.ndarray:
        self.invoke()
        return self.interpreter.get_tensor(self._output["index"])
