"""A SavedModel written with `enable_xla=False` as a TF.js graph model (reading side: no JAX).

We write TF.js's documented graph-model format ourselves instead of calling the `tensorflowjs`
pip package: that package declares the full `tensorflow` (beside our `tensorflow-cpu`),
TF-DF, tf-keras, tensorflow-hub, flax and jax as dependencies, and its SavedModel converter
imports TF-DF at module level, whose newest build (1.12.0) does not load in TF 2.21 (undefined
symbol in inference.so). The format is small: `model.json` holding `format: "graph-model"`,
`modelTopology` (the frozen GraphDef as protobuf JSON, Const values moved out), `signature`
(a SignatureDef as JSON) and `weightsManifest` (one group, `group1-shardNofM.bin` files of
4 MiB, each weight's bytes little-endian in manifest order), as tensorflowjs 4.22's
`write_artifacts` / `write_weights` write it. docs/tfjs.md.

What TF.js can run is checked before anything is written: every op type (graph and function
library) must be in TF.js 4.22's op list (data/tfjs_ops.json, taken from the tensorflowjs
wheel's op_list/*.json), and inputs, outputs and weights must be float32, int32 or bool
(int64 weights are narrowed to int32 when they fit, as tensorflowjs does; TF.js has no
float64/int64 tensors). `TfjsExportError` names each problem.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf.json_format import MessageToDict
from tensorflow.core.protobuf import meta_graph_pb2

from saved_model_tools import atomic_dir
from saved_model_tools import manifest as manifest_lib
from saved_model_tools.tfjs import graph as tfjs_graph
from tf_ops import nan_guards
from tf_ops.graph_passes import frozen_graph

SHARD_BYTES = 4 * 1024 * 1024
_TFJS_DTYPES = {tf.float32: "float32", tf.int32: "int32", tf.bool: "bool"}


class TfjsExportError(ValueError):
    """The model cannot run in TF.js as written; nothing was written."""


@dataclass(frozen=True)
class TfjsReport:
    """What `convert_to_tfjs` wrote."""
    out_dir: Path
    inputs: dict          # signature key -> (dtype, shape with None for dynamic dims)
    outputs: dict
    op_types: list = field(default_factory=list)
    weight_bytes: int = 0
    shards: int = 0
    needs_execute_async: bool = False   # control flow: call model.executeAsync, not execute


def supported_ops() -> tuple[str, frozenset[str]]:
    """(TF.js version, op names TF.js runs) from the vendored op list."""
    data = json.loads(resources.files("saved_model_tools").joinpath(
        "data/tfjs_ops.json").read_text())
    return data["tfjs_version"], frozenset(data["ops"])


def convert_to_tfjs(saved_model_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                    signature: str = "serving_default", overwrite: bool = False,
                    model_name: str | None = None) -> TfjsReport:
    """Writes one signature of a plain-ops SavedModel as a TF.js graph model.

    Args:
      saved_model_dir: a SavedModel written with `enable_xla=False` (an `XlaCallModule` model
        is refused: TF.js cannot run it).
      out_dir: the directory to write (`model.json` + `group1-shard*of*.bin`), atomically.
      signature: the signature to convert.
      overwrite: replace an existing `out_dir`.
      model_name: how errors name the model (default: `saved_model_dir`); `save_tfjs` names
        the function, not its temporary SavedModel.

    Returns:
      A `TfjsReport`. Load it in TF.js with `tf.loadGraphModel(".../model.json")` and call
      `model.executeAsync(inputs)` (`execute` works when `needs_execute_async` is False).

    Raises:
      TfjsExportError: unsupported ops or dtypes (each named), or an unknown signature.
      FileExistsError: `out_dir` exists and `overwrite` is False.

    Example:
        >>> import tempfile, numpy as np, saved_model_tools
        >>> d = tempfile.mkdtemp()
        >>> _ = saved_model_tools.save(f"{d}/sm", lambda p, x: x @ p, np.ones((3, 2), np.float32),
        ...     [np.ones((1, 3), np.float32)], polymorphic_shapes=["(b, 3)"], enable_xla=False)
        >>> report = convert_to_tfjs(f"{d}/sm", f"{d}/js")
        >>> sorted(p.name for p in report.out_dir.iterdir())
        ['group1-shard1of1.bin', 'model.json']
        >>> report.inputs
        {'input_0': ('float32', [None, 3])}
    """
    name = model_name or str(saved_model_dir)
    loaded = tf.saved_model.load(str(saved_model_dir))
    if signature not in loaded.signatures:
        raise TfjsExportError(f"{name} has no signature {signature!r}; it has "
                              f"{sorted(loaded.signatures)}. Fix: pass signature=one of them.")
    function = loaded.signatures[signature]
    graph, inputs, outputs = frozen_graph(function)
    input_keys = _input_keys(function, inputs)
    output_keys = sorted(function.structured_outputs)   # flat outputs follow sorted keys
    output_names = [t.name for t in outputs]
    # TF.js's kernels decide NaN results, as for a hand-written model (tf_ops.nan_guards).
    graph_def = nan_guards.strip(graph.as_graph_def())
    graph_def = tfjs_graph.strip_assertions(graph_def, output_names)
    xla_ops = sorted(op for op in tfjs_graph.library_op_types(graph_def)
                     if op.startswith("Xla"))
    if xla_ops:
        # The one cause: the other ops and string constants TF.js refuses come with it (the
        # module's shape assertions, the call around it) and go with --no-xla.
        raise TfjsExportError(
            f"{name} signature {signature!r} cannot run in TF.js: it was saved with XLA "
            f"({', '.join(xla_ops)} ops), which TF.js cannot run; nothing was written. Fix: "
            f"export it with --no-xla (enable_xla=False: plain TF ops) and convert that model.")
    graph_def = tfjs_graph.erfc_as_erf(graph_def)
    graph_def = tfjs_graph.optimize(graph_def, graph, output_names)
    problems = _op_problems(graph_def, _op_sources(saved_model_dir)) \
        + _boundary_problems(input_keys, inputs, "input") \
        + _boundary_problems(output_keys, outputs, "output")
    weights, weight_problems = _extract_weights(graph_def)
    problems += weight_problems
    if problems:
        raise TfjsExportError(f"{name} signature {signature!r} cannot run in TF.js "
                              f"({len(problems)} problem(s)); nothing was written:\n  - "
                              + "\n  - ".join(problems))
    signature_def = _signature_def(input_keys, inputs, output_keys, outputs)
    data = b"".join(array.tobytes() for _, array in weights)
    with atomic_dir.atomic_directory(out_dir, overwrite=overwrite) as tmp:
        paths = []
        count = max(1, -(-len(data) // SHARD_BYTES))
        for i in range(count):
            name = f"group1-shard{i + 1}of{count}.bin"
            (tmp / name).write_bytes(data[i * SHARD_BYTES:(i + 1) * SHARD_BYTES])
            paths.append(name)
        model_json = {
            "format": "graph-model",
            "generatedBy": tf.__version__,
            "convertedBy": "jax2tf-native",
            "signature": MessageToDict(signature_def),
            "modelTopology": MessageToDict(graph_def),
            "weightsManifest": [{"paths": paths, "weights": [
                {"name": name, "shape": list(array.shape), "dtype": _dtype_name(array)}
                for name, array in weights]}],
        }
        (tmp / "model.json").write_text(json.dumps(model_json))
    ops = sorted(tfjs_graph.library_op_types(graph_def))
    return TfjsReport(
        out_dir=Path(out_dir),
        inputs={k: (_TFJS_DTYPES[t.dtype], t.shape.as_list()) for k, t in zip(input_keys, inputs)},
        outputs={k: (_TFJS_DTYPES[t.dtype], t.shape.as_list())
                 for k, t in zip(output_keys, outputs)},
        op_types=ops, weight_bytes=len(data), shards=count,
        needs_execute_async=bool({"While", "StatelessWhile", "If", "StatelessIf"} & set(ops)))


def _input_keys(function, inputs) -> list[str]:
    """Signature input names in the order of the frozen graph's placeholders."""
    specs = function.structured_input_signature[1]
    by_tensor_name = {spec.name: key for key, spec in specs.items()}
    return [by_tensor_name.get(t.name.split(":")[0], t.name.split(":")[0]) for t in inputs]


def _op_sources(saved_model_dir) -> dict:
    """TF op type -> the user's lines it came from, as the manifest of a plain model records
    them ({} for other models)."""
    try:
        record = manifest_lib.read(Path(saved_model_dir))
    except manifest_lib.ManifestError:
        return {}
    return record.plain_op_sources if record is not None else {}


def _op_problems(graph_def, sources: dict) -> list[str]:
    version, supported = supported_ops()
    problems = []
    for op in sorted(tfjs_graph.library_op_types(graph_def) - supported):
        where = (f" (from {', '.join(sources[op])} in the JAX code)" if sources.get(op)
                 else "")
        problems.append(f"op {op!r}{where} is not in TF.js {version}'s supported ops: TF.js has "
                        f"no kernel for it. Fix: replace the JAX operation that lowers to {op} "
                        f"(`jax2tf-native inspect` lists a model's op types)")
    return problems


def _boundary_problems(keys, tensors, kind) -> list[str]:
    return [f"{kind} {key!r} is {t.dtype.name}: TF.js tensors are float32, int32 or bool. Fix: "
            f"cast at the boundary (e.g. give the JAX function float32 {kind}s)"
            for key, t in zip(keys, tensors) if t.dtype not in _TFJS_DTYPES]


def _extract_weights(graph_def) -> tuple[list[tuple[str, np.ndarray]], list[str]]:
    """Moves every Const value out of the graph (and its functions, as `function/const`)."""
    weights, problems = [], []

    def take(node, name):
        array = tf.make_ndarray(node.attr["value"].tensor)
        if array.dtype == np.int64 and (array.size == 0 or (
                array.min() >= np.iinfo(np.int32).min and array.max() <= np.iinfo(np.int32).max)):
            array = array.astype(np.int32)   # TF.js runs int64 graph tensors as int32
        if array.dtype not in (np.float32, np.int32, np.bool_):
            problems.append(f"constant {name!r} is {array.dtype} {list(array.shape)}: TF.js "
                            f"weights are float32, int32 or bool")
            return
        # (np.ascontiguousarray would turn a scalar into shape [1].)
        weights.append((name, np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")))
        # TF.js reads the value from the weights; the node keeps dtype and shape only.
        tensor = node.attr["value"].tensor
        shape = tensor.tensor_shape
        kept_dtype = tensor.dtype
        tensor.Clear()
        tensor.dtype = kept_dtype
        tensor.tensor_shape.CopyFrom(shape)

    for node in graph_def.node:
        if node.op == "Const":
            take(node, node.name)
    for function in graph_def.library.function:
        prefix = function.signature.name
        consts = {n.name for n in function.node_def if n.op == "Const"}
        for node in function.node_def:
            if node.op == "Const":
                node.name = f"{prefix}/{node.name}"
                take(node, node.name)
            for i, inp in enumerate(node.input):
                control = inp.startswith("^")
                base = inp.lstrip("^").split(":")[0]
                if base in consts:
                    node.input[i] = ("^" if control else "") + f"{prefix}/" + inp.lstrip("^")
        for key, value in list(function.ret.items()):
            if value.split(":")[0] in consts:
                function.ret[key] = f"{prefix}/{value}"
    return weights, problems


def _dtype_name(array: np.ndarray) -> str:
    return {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
            np.dtype(np.bool_): "bool"}[array.dtype.newbyteorder("=")]


def _signature_def(input_keys, inputs, output_keys, outputs):
    signature = meta_graph_pb2.SignatureDef()
    for keys, tensors, target in ((input_keys, inputs, signature.inputs),
                                  (output_keys, outputs, signature.outputs)):
        for key, tensor in zip(keys, tensors):
            target[key].name = tensor.name
            target[key].dtype = tensor.dtype.as_datatype_enum
            target[key].tensor_shape.CopyFrom(tensor.shape.as_proto())
    return signature
