"""`inspect`: what a SavedModel holds and which TensorFlow can run it, read without JAX.

Everything here reads files with TensorFlow, numpy and the standard library only, so it runs on a
serving host that has TF and no JAX. It works on any SavedModel (ours, the peer jax2tf's, plain
TF); what jax2tf-native recorded in `assets.extra/` (see `manifest`) is added when present.

Sources, in order of trust:
  - `saved_model.pb`: the SignatureDefs (inputs/outputs, dtypes, shapes with -1 for dimensions
    left open, i.e. polymorphic) and the function library holding each `XlaCallModule` op
    (its `module`, `version` = calling convention, `platforms`, `disabled_checks` attributes);
  - `variables/variables.index`: the checkpoint index (names, dtypes, shapes of the variables);
  - the StableHLO of each module, deserialized by the installed TF (no JAX): its header names the
    StableHLO version it was written in, its text lists the custom calls;
  - `saved_model_tools/data/tf_version_matrix.json`: which TF version reads which StableHLO version and
    runs which calling convention (measured by tools/tf_version_matrix.py);
  - `tf_ops.custom_call_allowlist`: which custom-call targets TF's XLA can run, per platform.

This module assembles the report; the pieces live beside it in `saved_model_tools.inspect`
(whose package re-exports their public names).
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import tensorflow as tf

from saved_model_tools import manifest as manifest_lib
from saved_model_tools import warmup
from saved_model_tools.inspect.proto import (
    function_edges, read_saved_model_proto, read_variables,
    select_meta_graph, signature_functions, tensor_report)
from saved_model_tools.inspect.report import (
    ModuleReport, SavedModelReadError, SavedModelReport, SignatureReport)
from saved_model_tools.inspect.stablehlo import (
    BYTECODE_MAGIC, STABLEHLO_PRODUCER, custom_call_report, custom_call_targets, main_signature,
    module_text, raw_vhlo_text, rewritten_lapack_targets,
    stablehlo_producer)
from saved_model_tools.inspect.oldest_tf import combined_support, tf_support
from saved_model_tools.inspect.tf_version_matrix import load_tf_version_matrix
from tf_ops import host_can_run
from tf_ops import shardings as tf_shardings


def check_readable(saved_model_dir: str | Path):
    """Everything `verify` and `tflite` check before TF loads a model; returns its proto.

    The directory holds no symlink leading outside it, saved_model.pb parses, the checkpoint
    index reads and its data files are present and large enough, and jax2tf-native's manifest
    (when present) parses and agrees with the graph's signatures.

    Raises:
      SavedModelReadError: naming the file and what is wrong with it.

    Example:
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> proto = check_readable(small_saved_model())
        >>> len(proto.meta_graphs)
        1
    """
    directory = Path(saved_model_dir)
    proto = read_saved_model_proto(directory)
    read_variables(directory)
    try:
        manifest = manifest_lib.read(directory)
    except manifest_lib.ManifestError as e:
        raise SavedModelReadError(str(e)) from None
    if manifest is not None:
        meta_graph = select_meta_graph(proto)
        lies = []
        for recorded in manifest.signatures:
            if recorded.name in meta_graph.signature_def:
                lies += _manifest_disagreements(recorded.name,
                                                meta_graph.signature_def[recorded.name], recorded)
        if lies:
            raise SavedModelReadError(
                f"{directory}/{manifest_lib.MANIFEST_FILE} disagrees with the graph: "
                f"{'; '.join(lies)}. Fix: re-save the model; the manifest was edited or belongs "
                f"to another model.")
    return proto


def _manifest_disagreements(name: str, sig_def, recorded) -> list[str]:
    """Where the manifest's record of a signature differs from the graph's signature."""

    notes = []
    for kind, graph_side, manifest_side in (("input", sig_def.inputs, recorded.inputs),
                                            ("output", sig_def.outputs, recorded.outputs)):
        names = {t.name for t in manifest_side}
        if names != set(graph_side):
            notes.append(f"the manifest lists {kind}s {sorted(names)} for signature {name!r}; "
                         f"the graph has {sorted(graph_side)}")
            continue
        for t in manifest_side:
            # A corrupt dtype enum reads as "<dtype enum N>" here: a disagreement, not a crash.
            graph = tensor_report(t.name, graph_side[t.name], None)
            dtype, shape = graph.dtype, graph.shape
            if dtype != t.dtype or (shape is not None and shape != tuple(t.shape)):
                notes.append(f"the manifest records {kind} {t.name!r} of {name!r} as "
                             f"{t.dtype}{list(t.shape)}; the graph has {dtype}"
                             f"{list(shape) if shape is not None else '[unknown rank]'}")
    return notes



def inspect_saved_model(saved_model_dir: str | Path, *, mlir: bool = False,
                        tag: str = "serve") -> SavedModelReport:
    """Reads a SavedModel (ours or anyone's) and reports what it holds, without JAX.

    Args:
      saved_model_dir: the SavedModel directory.
      mlir: also keep each module's StableHLO text in `ModuleReport.mlir`.
      tag: the MetaGraph tag to inspect ("serve" is what TF Serving loads).

    Returns:
      A `SavedModelReport`.

    Raises:
      SavedModelReadError: not a readable SavedModel (the message says what is wrong and how to
        fix it).
      ValueError: jax2tf-native's manifest exists but cannot be read.

    Example:
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> report = inspect_saved_model(small_saved_model())
        >>> report.signature("serving_default").inputs[0].polymorphic_dims
        (0,)
        >>> print(report.format())
        SavedModel ... Signatures (1):
          serving_default  [tensorflow/serving/predict]
            in   x: float32[?, 3]  (polymorphic_shapes '(b, 3)')
            out  y: float32[?, 2]
        ...
    """

    directory = Path(saved_model_dir)
    proto = read_saved_model_proto(directory)
    meta_graph = select_meta_graph(proto, tag)
    manifest = manifest_lib.read(directory)
    notes: list[str] = []
    edges = function_edges(meta_graph)

    signatures = []
    for name in sorted(meta_graph.signature_def):
        if name == "__saved_model_init_op":
            continue
        sig_def = meta_graph.signature_def[name]
        recorded = None
        if manifest is not None:
            try:
                recorded = manifest.signature(name)
            except KeyError:
                notes.append(f"signature {name!r} is not in jax2tf-native's manifest")
        if recorded is not None:
            notes.extend(_manifest_disagreements(name, sig_def, recorded))
        poly = {t.name: t.polymorphic_shape for t in recorded.inputs} if recorded else {}
        signatures.append(SignatureReport(
            name=name, method_name=sig_def.method_name,
            inputs=tuple(tensor_report(k, sig_def.inputs[k], poly.get(k))
                         for k in sorted(sig_def.inputs)),
            outputs=tuple(tensor_report(k, sig_def.outputs[k], None)
                          for k in sorted(sig_def.outputs)),
            reference_batch_sizes=tuple(r.batch_size for r in recorded.references)
            if recorded else (),
            reference_source=recorded.reference_source if recorded else None,
            functions=signature_functions(meta_graph, sig_def, edges)))
    if manifest is not None:
        missing = {s.name for s in manifest.signatures} - {s.name for s in signatures}
        if missing:
            notes.append(f"the manifest lists signatures the graph lacks: {sorted(missing)}")

    # De-duplicate XlaCallModule ops by the bytes of their module.
    by_hash: dict[str, dict] = {}
    op_count = 0
    for fn in meta_graph.graph_def.library.function:
        for node in fn.node_def:
            if node.op != "XlaCallModule":
                continue
            op_count += 1
            module = node.attr["module"].s
            digest = hashlib.sha256(module).hexdigest()
            entry = by_hash.setdefault(digest, {"module": module, "node": node, "copies": 0,
                                                "functions": [], "nodes": fn.node_def})
            entry["copies"] += 1
            if fn.signature.name not in entry["functions"]:
                entry["functions"].append(fn.signature.name)
    for node in meta_graph.graph_def.node:  # TF1-style graphs may hold the op at top level
        if node.op == "XlaCallModule":
            op_count += 1
            module = node.attr["module"].s
            digest = hashlib.sha256(module).hexdigest()
            entry = by_hash.setdefault(digest, {"module": module, "node": node, "copies": 0,
                                                "functions": [],
                                                "nodes": meta_graph.graph_def.node})
            entry["copies"] += 1

    matrix = load_tf_version_matrix()
    modules = []
    for digest, entry in by_hash.items():
        module, node = entry["module"], entry["node"]
        platforms = tuple(p.decode() for p in node.attr["platforms"].list.s)
        calling_convention = int(node.attr["version"].i)
        producer = stablehlo_producer(module)
        match = STABLEHLO_PRODUCER.match(producer or "")
        text, error = module_text(module)
        if text is None and module.startswith(BYTECODE_MAGIC):
            # The raw VHLO form still names the custom calls when deserialization fails.
            raw_text, _ = raw_vhlo_text(module)
            targets = custom_call_targets(raw_text) if raw_text else ()
        else:
            targets = custom_call_targets(text) if text else ()
        custom_calls = tuple(custom_call_report(t, platforms) for t in targets)
        support = tf_support(calling_convention, match.group(1) if match else None,
                             custom_calls, matrix)
        if support.oldest_tf is None and text is not None and matrix is not None:
            support = dataclasses.replace(support, reason=(
                f"{support.reason}. The installed TF {tf.__version__} did deserialize it (it "
                f"uses no op newer than TF reads), so it may run there, but that is not "
                f"guaranteed"))
        sig_names = tuple(s.name for s in signatures
                          if set(entry["functions"]) & set(s.functions))
        disabled = tuple(c.decode() for c in node.attr["disabled_checks"].list.s)
        devices = (int(node.attr[host_can_run.DEVICES_ATTR].i)
                   if host_can_run.DEVICES_ATTR in node.attr else 1)
        multi_device = tuple(v.decode()
                             for v in node.attr[host_can_run.MULTI_DEVICE_OPS_ATTR].list.s)
        input_shardings, output_shardings = _shardings_around(node, entry["nodes"])
        modules.append(ModuleReport(
            sha256=digest, size_bytes=len(module), copies=entry["copies"],
            calling_convention_version=calling_convention, platforms=platforms,
            disabled_checks=disabled,
            stablehlo_version=match.group(1) if match else None, producer=producer,
            deserializes_in_installed_tf=text is not None, deserialize_error=error,
            custom_calls=custom_calls, main_signature=main_signature(text) if text else None,
            functions=tuple(entry["functions"]), signatures=sig_names,
            tf_support=support, devices=devices, input_shardings=input_shardings,
            output_shardings=output_shardings, multi_device_ops=multi_device,
            not_runnable_here=host_can_run.problem_here(
                f"module sha256 {digest[:16]}", platforms, devices, multi_device,
                host_can_run.PLATFORM_CHECK in disabled),
            mlir=text if mlir else None,
            rewritten_lapack=rewritten_lapack_targets(text)))

    served = [m for m in modules if m.signatures] or modules
    model_support = combined_support([m.tf_support for m in served])

    variables = read_variables(directory)
    variable_bytes = sum(v.bytes for v in variables)
    if manifest is not None and manifest.variable_count != len(variables):
        notes.append(f"the manifest records {manifest.variable_count} variables, the checkpoint "
                     f"holds {len(variables)}")
    if manifest is not None and manifest.variable_bytes != variable_bytes:
        notes.append(f"the manifest records {manifest.variable_bytes} variable bytes, the "
                     f"checkpoint holds {variable_bytes}")

    warmup_lines = None
    warmup_file = directory / manifest_lib.WARMUP_FILE
    if warmup_file.is_file():
        try:
            requests = warmup.read_warmup_requests(warmup_file)
            warmup_lines = tuple(warmup.summarize(requests))
            names = {s.name for s in signatures}
            unknown = sorted({sig for sig, _ in requests} - names)
            if unknown:
                notes.append(f"warmup requests name signatures the model lacks: {unknown} (TF "
                             f"Serving fails to load such a model)")
        except ValueError as e:
            notes.append(f"unreadable warmup file: {e}")

    op_types, xla_op_types = graph_op_types(meta_graph.graph_def)
    pb = directory / "saved_model.pb"
    return SavedModelReport(
        path=str(directory), tags=tuple(meta_graph.meta_info_def.tags),
        saved_model_pb_bytes=pb.stat().st_size if pb.is_file() else 0,
        signatures=tuple(signatures), modules=tuple(modules), xla_call_module_ops=op_count,
        variable_count=len(variables), variable_bytes=variable_bytes, variables=variables,
        manifest=manifest, warmup_requests=warmup_lines, tf_support=model_support,
        tensorflow_version=tf.__version__, notes=tuple(notes),
        lowering=XLA_CALL_MODULE if op_count else PLAIN_TF_OPS, op_types=op_types,
        xla_op_types=xla_op_types)


XLA_CALL_MODULE = "XlaCallModule"
PLAIN_TF_OPS = "plain TF ops"
# Op types only TF's XLA runs, and the node attribute that asks TF to compile a node with XLA.
_XLA_OP_PREFIXES = ("Xla", "_Xla")
_XLA_COMPILE_ATTR = "_XlaCompile"


def graph_op_types(graph_def) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every op type, those that need XLA) in `graph_def` and its function library, sorted.

    A node marked `_XlaCompile` (or any `_xla_*` attribute) counts as needing XLA too, listed
    as "<attribute> attribute" (`jit_compile=True` functions carry `_XlaMustCompile` on the
    function itself, listed the same way).

    Example:
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> from saved_model_tools.inspect.proto import read_saved_model_proto
        >>> proto = read_saved_model_proto(small_saved_model())
        >>> graph_op_types(proto.meta_graphs[0].graph_def)[1]  # saved with jit_compile=True
        ('XlaCallModule', '_XlaMustCompile attribute')
    """
    nodes = list(graph_def.node)
    needs_xla = set()
    for fn in graph_def.library.function:
        nodes.extend(fn.node_def)
        needs_xla.update(f"{name} attribute" for name, value in fn.attr.items()
                         if _is_xla_attr(name, value))
    types = {node.op for node in nodes}
    needs_xla.update(t for t in types if t.startswith(_XLA_OP_PREFIXES))
    for node in nodes:
        needs_xla.update(f"{name} attribute" for name, value in node.attr.items()
                         if _is_xla_attr(name, value))
    return tuple(sorted(types)), tuple(sorted(needs_xla))


def _is_xla_attr(name: str, value) -> bool:
    """An attribute asking for XLA: `_Xla*` / `_xla*`, unless it is a bool set to False (TF
    writes `_XlaMustCompile: false` on every function without jit_compile)."""
    return (name.startswith(("_Xla", "_xla"))
            and (value.WhichOneof("value") != "b" or value.b))


def _shardings_around(call_node, nodes) -> tuple[tuple, tuple]:
    """Shardings of the XlaSharding ops feeding and reading an XlaCallModule node (as jax2tf
    and jax2tf-native write them), None where there is none."""
    by_name = {n.name: n for n in nodes}

    def sharding_of(node) -> str | None:
        if node is None or node.op != "XlaSharding":
            return None
        return tf_shardings.format_op_sharding(node.attr["sharding"].s)

    inputs = tuple(sharding_of(by_name.get(ref.split(":")[0]))
                   for ref in call_node.input if not ref.startswith("^"))
    n_out = len(call_node.attr["Tout"].list.type)
    outputs: list = [None] * n_out
    for n in nodes:
        if n.op != "XlaSharding" or not n.input:
            continue
        parts = n.input[0].split(":")
        if parts[0] == call_node.name and len(parts) == 3 and int(parts[2]) < n_out:
            outputs[int(parts[2])] = sharding_of(n)
        elif parts[0] == call_node.name and len(parts) == 2 and int(parts[1]) < n_out:
            outputs[int(parts[1])] = sharding_of(n)  # top-level graphs: "name:index"
    return inputs, tuple(outputs)
