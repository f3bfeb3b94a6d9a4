"""`tflite`: convert a SavedModel with TF's TFLite converter and check the interpreter's outputs.

What TF 2.21's converter does with our models (measured; tests/saved_model_tools/test_tflite.py
keeps checking it): it does not keep `XlaCallModule` as an op. It deserializes the StableHLO
inside and legalizes each op to TFLite builtins (a CNN becomes DEPTHWISE_CONV_2D,
FULLY_CONNECTED, STABLEHLO_REDUCE_WINDOW, ...; the exact-erf GELU becomes elementwise ops), so
the built-in example CNN converts with TFLITE_BUILTINS only, Variables folded in, and the
polymorphic batch kept (input shape_signature -1; the signature runner resizes per call).
A module with an op that has no TFLite legalization fails to convert, and SELECT_TF_OPS does not
rescue it, because the failing op is a StableHLO op inside the module, not a TF op: measured for
sort (also `lax.top_k`; "'vhlo.sort_v1' op is not part of the vhlo support yet"), complex fft
("vhlo.fft_v1"), and the variadic reduce of `jnp.argmax` / `argmin` ("mhlo.reduce").

A SavedModel saved with `enable_xla=False` (plain TF ops) goes through the converter's TF-op
path instead: sort, argsort (ascending and descending, NaN placed as JAX places it), top_k,
argmax/argmin, cumsum and cummax convert with TFLITE_BUILTINS only (TOPK_V2, GATHER,
BITWISE_XOR, CUMSUM, ...), keep the dynamic batch, and match JAX exactly
(tests/saved_model_tools/test_tflite.py). Not there: cumprod (TF's Cumprod is no builtin:
FlexCumprod, which needs SELECT_TF_OPS and a Flex-linked runtime; TF 2.21's tf.lite.Interpreter
has none, so such a model converts but cannot be checked here), and complex fft (the converter
rewrites it to RFFT2D and the interpreter fails to prepare its RESHAPE); `jnp.fft.rfft`
converts either way. The example CNN and a transformer block convert with builtins by both
routes. Sort keys measured plain: f32, i32, i16, u8 and bool convert with builtins; f16
(TFLite's EQUAL takes no f16), i64/f64 (BITWISE_XOR takes no int64), and descending sorts of
i8/u16/u32 (REVERSE_V2 takes none of those) do not convert with builtins only.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from saved_model_tools import manifest as manifest_lib
from saved_model_tools import reference_file
from saved_model_tools.inspect.proto import select_meta_graph
from saved_model_tools.inspect.saved_model import check_readable
from saved_model_tools.inspect.stablehlo import native_stderr_captured
from saved_model_tools.tflite.converter_errors import converter_error_lines, with_sources
from saved_model_tools.tflite.report import (BUILTINS, BUILTINS_AND_SELECT, TfliteReport)
from saved_model_tools.verify.compare import compare_values
from saved_model_tools.verify.report import OutputCheck
from tf_ops import nan_guards

_ANALYZER_OP = re.compile(r"^\s*Op#\d+ (\w+)\(", re.MULTILINE)


def _check(signature: str, *fields, **named) -> OutputCheck:
    """A per-output check, the same record `verify` reports, from the "tflite" load path."""
    return OutputCheck(signature, "tflite", *fields, **named)


def _converter(saved_model_dir: Path, signature: str, fixed_batch: int | None, ops: list):
    if fixed_batch is None:
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir),
                                                             signature_keys=[signature])
    else:
        loaded = tf.saved_model.load(str(saved_model_dir))
        fn = loaded.signatures[signature]
        specs = fn.structured_input_signature[1]
        fixed = {k: tf.TensorSpec([fixed_batch if (i == 0 and d is None) else d
                                   for i, d in enumerate(s.shape.as_list())], s.dtype, name=k)
                 for k, s in specs.items()}
        wrapper = tf.function(lambda **kw: fn(**kw), autograph=False)
        concrete = wrapper.get_concrete_function(**fixed)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], loaded)
    converter.target_spec.supported_ops = ops
    return converter


def _convert(saved_model_dir: Path, signature: str, fixed_batch: int | None, ops: list):
    # On failure MLIR prints every diagnostic with its full call-site chain to fd 2; the
    # exception carries the same errors, of which the report keeps one line each.
    with native_stderr_captured(), contextlib.redirect_stdout(io.StringIO()), \
            without_nan_guards(saved_model_dir) as directory:
        return _converter(directory, signature, fixed_batch, ops).convert()


@contextlib.contextmanager
def without_nan_guards(saved_model_dir: Path):
    """The SavedModel as TFLite gets it: without the NaN guards of plain graphs (tf_ops.
    nan_guards: TFLite's kernels decide NaN results, as for a hand-written model). A model
    without guards is used as it is; otherwise a temporary copy of saved_model.pb with the
    guards bypassed, beside links to the model's variables and assets."""
    pb = saved_model_dir / "saved_model.pb"
    proto = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
    changed = False
    for meta_graph in proto.meta_graphs:
        stripped = nan_guards.strip(meta_graph.graph_def)
        if stripped != meta_graph.graph_def:
            meta_graph.graph_def.CopyFrom(stripped)
            changed = True
    if not changed:
        yield saved_model_dir
        return
    with tempfile.TemporaryDirectory(prefix="tflite_input_") as temp:
        copy = Path(temp)
        (copy / "saved_model.pb").write_bytes(proto.SerializeToString())
        for entry in saved_model_dir.iterdir():
            if entry.name != "saved_model.pb":
                (copy / entry.name).symlink_to(entry.resolve())
        yield copy


def operators(model: bytes) -> tuple[str, ...]:
    """The distinct operators of a .tflite flatbuffer, sorted (tf.lite's Analyzer)."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        tf.lite.experimental.Analyzer.analyze(model_content=model)
    return tuple(sorted(set(_ANALYZER_OP.findall(text.getvalue()))))


def _compare(signature, batch, name, got, want, expected, rtol, atol) -> OutputCheck:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return _check(signature, batch, name, expected, False,
                      detail=f"shape {list(got.shape)}, expected {list(want.shape)}")
    if got.dtype != want.dtype:
        return _check(signature, batch, name, expected, False,
                      detail=f"dtype {got.dtype}, expected {want.dtype}")
    compared = compare_values(got, want, rtol, atol)
    return _check(signature, batch, name, expected, compared.passed, compared.max_abs_error,
                  rtol, atol, detail=compared.detail)


def _tf_cases(directory: Path, signature: str, runner, batch_size: int | None) -> list:
    """Without references: seeded inputs at batch 1 and 2, expected = the SavedModel in TF."""

    details = runner.get_input_details()
    if any(-1 in list(d["shape_signature"])[1:] for d in details.values()):
        return []  # open non-batch dimensions: no input can be built
    fn = tf.saved_model.load(str(directory)).signatures[signature]
    rng = np.random.default_rng(0)
    cases = []
    for batch in ((batch_size,) if batch_size is not None else (1, 2)):
        inputs = {}
        for name, d in details.items():
            shape = [batch if (i == 0 and n == -1) else int(n)
                     for i, n in enumerate(d["shape_signature"])]
            dtype = np.dtype(d["dtype"])
            inputs[name] = (rng.standard_normal(shape).astype(dtype) if dtype.kind == "f"
                            else np.zeros(shape, dtype))
        outputs = {k: v.numpy() for k, v in fn(**{k: tf.constant(v)
                                                  for k, v in inputs.items()}).items()}
        cases.append((batch, inputs, outputs, "tf savedmodel", 1e-4, 1e-5))
    return cases


def convert_to_tflite(saved_model_dir: str | Path, out_file: str | Path, *,
                      signature: str = "serving_default", batch_size: int | None = None,
                      allow_select_tf_ops: bool = False, rtol: float | None = None,
                      atol: float | None = None) -> TfliteReport:
    """Converts one signature to a .tflite file and checks the interpreter on recorded data.

    Conversion uses TFLITE_BUILTINS only. If that fails, SELECT_TF_OPS is tried to tell whether
    it would help; its result is written only with `allow_select_tf_ops=True` (such a model
    needs the Flex delegate at run time).

    Args:
      saved_model_dir: the SavedModel directory.
      out_file: the .tflite file to write (replaced atomically).
      signature: the signature to convert.
      batch_size: None keeps a polymorphic batch dynamic (the interpreter resizes per call);
        an int fixes it (e.g. for delegates that need static shapes).
      allow_select_tf_ops: write a model that needs SELECT_TF_OPS when builtins do not suffice.
      rtol, atol: tolerances; default the ones recorded with each reference.

    Returns:
      A `TfliteReport` (`report.ok` when every output matched its reference).

    Raises:
      saved_model_tools.inspect.SavedModelReadError: not a readable SavedModel.
      saved_model_tools.manifest.ManifestError: a reference file is corrupt or outside the model.
      KeyError: no such signature (the message lists the model's signatures).
      ValueError: a bad `batch_size`.

    Example:
        >>> import tempfile
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> out = Path(tempfile.mkdtemp()) / "model.tflite"
        >>> report = convert_to_tflite(small_saved_model(), out)
        >>> report.ops_set, report.ok
        ('TFLITE_BUILTINS', True)
    """

    start = time.perf_counter()
    directory = Path(saved_model_dir)
    meta_graph = select_meta_graph(check_readable(directory))
    available = sorted(k for k in meta_graph.signature_def if k != "__saved_model_init_op")
    if signature not in available:
        raise KeyError(f"no signature {signature!r} in {directory}; it has {available}. Fix: "
                       f"pass signature= one of those.")
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                   or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}.")
    # Corrupt or lying reference files fail here, before the .tflite file is written.
    recorded_manifest = manifest_lib.read(directory)
    if recorded_manifest is not None and signature in {
            s.name for s in recorded_manifest.signatures}:
        for ref in recorded_manifest.signature(signature).references:
            reference_file.read(manifest_lib.reference_path(directory, ref.file))

    errors: tuple[str, ...] = ()
    select_note = "not needed"
    ops_set = BUILTINS
    try:
        model = _convert(directory, signature, batch_size, [tf.lite.OpsSet.TFLITE_BUILTINS])
    except Exception as e:  # ConverterError, or a legalization failure raised another way
        errors = with_sources(converter_error_lines(e), recorded_manifest)
        try:
            selected = _convert(directory, signature, batch_size,
                                [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS])
            select_note = ("converts with SELECT_TF_OPS (needs the Flex delegate at run time)"
                           + ("" if allow_select_tf_ops else
                              "; pass allow_select_tf_ops=True / --allow-select-tf-ops to write"
                              " it"))
        except Exception as e2:
            selected = None
            select_note = "also fails: " + "; ".join(converter_error_lines(e2))
        if selected is None or not allow_select_tf_ops:
            return TfliteReport(str(directory), signature, None, "not-converted", None, 0, (), {},
                                batch_size, errors, select_note, (),
                                time.perf_counter() - start)
        model, ops_set = selected, BUILTINS_AND_SELECT

    out = Path(out_file)
    with warnings.catch_warnings():
        # tf.lite.Interpreter warns that it moves to ai_edge_litert; it is what TF 2.21 ships.
        warnings.simplefilter("ignore")
        interpreter = tf.lite.Interpreter(model_content=model)
    runner = interpreter.get_signature_runner(signature)
    shape_signatures = {
        name: [int(d) for d in detail["shape_signature"]]
        for name, detail in runner.get_input_details().items()}

    checks: list[OutputCheck] = []
    manifest = manifest_lib.read(directory)
    recorded = None
    if manifest is not None:
        try:
            recorded = manifest.signature(signature)
        except KeyError:
            recorded = None
    cases = []  # (batch, inputs, expected outputs, what, rtol, atol)
    for ref in (recorded.references if recorded else ()):
        data = reference_file.read(manifest_lib.reference_path(directory, ref.file))
        inputs = {k[len("inputs/"):]: v for k, v in data.items() if k.startswith("inputs/")}
        outputs = {k[len("outputs/"):]: v for k, v in data.items() if k.startswith("outputs/")}
        if batch_size is not None and ref.batch_size != batch_size:
            continue
        cases.append((ref.batch_size, inputs, outputs, f"{recorded.reference_source} reference",
                      ref.rtol if rtol is None else rtol, ref.atol if atol is None else atol))
    if batch_size is not None and not cases and recorded and recorded.references:
        # No reference at the fixed batch: the recorded rows, resized, run in TF for comparison.
        ref = recorded.references[-1]
        data = reference_file.read(manifest_lib.reference_path(directory, ref.file))
        inputs = {k[len("inputs/"):]: np.take(v, np.arange(batch_size) % ref.batch_size, axis=0)
                  for k, v in data.items() if k.startswith("inputs/")}
        fn = tf.saved_model.load(str(directory)).signatures[signature]
        outputs = {k: v.numpy() for k, v in fn(**{k: tf.constant(v)
                                                  for k, v in inputs.items()}).items()}
        cases.append((batch_size, inputs, outputs, "tf savedmodel",
                      ref.rtol if rtol is None else rtol, ref.atol if atol is None else atol))

    if not cases and not (recorded and recorded.references):
        cases = _tf_cases(directory, signature, runner, batch_size)

    for batch, inputs, expected, what, case_rtol, case_atol in cases:
        try:
            got = runner(**inputs)
        except Exception as e:
            checks.append(_check(signature, batch, "*", what, False,
                                 detail=f"the interpreter raised {type(e).__name__}: "
                                        f"{str(e).strip().splitlines()[0][:300]}"))
            continue
        for name in sorted(expected):
            if name not in got:
                checks.append(_check(signature, batch, name, what, False,
                                     detail=f"missing from TFLite outputs {sorted(got)}"))
                continue
            checks.append(_compare(signature, batch, name, got[name], expected[name], what,
                                   case_rtol, case_atol))

    if not all(c.passed for c in checks):
        status = "failed"
    elif not checks or not (recorded and recorded.references):
        status = "no-references"
    else:
        status = "passed"
    written = None
    if status != "failed":  # a model that fails its check is not written (nor one replaced)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        partial.write_bytes(model)
        os.replace(partial, out)
        written = str(out)
    return TfliteReport(str(directory), signature, written, status, ops_set, len(model),
                        operators(model), shape_signatures, batch_size, errors, select_note,
                        tuple(checks), time.perf_counter() - start)
