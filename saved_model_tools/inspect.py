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
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

import tensorflow as tf
from google.protobuf import message, text_format
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import dtypes as tf_dtypes

from saved_model_tools import manifest as manifest_lib
from tf_ops import custom_call_allowlist, runnable
from tf_ops import shardings as tf_shardings
from tf_ops import versions
from saved_model_tools import warmup

# Measured by tools/tf_version_matrix.py; read, never edited, here.
TF_VERSION_MATRIX_FILE = Path(__file__).resolve().parent / "data" / "tf_version_matrix.json"

# TF's XlaCallModule kernel accepts calling conventions from 4 on (see tf_ops.versions).
_MIN_CALLING_CONVENTION = 4
_BYTECODE_MAGIC = b"ML\xefR"
_STABLEHLO_PRODUCER = re.compile(r"^StableHLO_v(\d+\.\d+\.\d+)$")
# `stablehlo.custom_call @target(` (pretty form, bare or quoted symbol) and
# `call_target_name = "target"` / `#vhlo.string_v1<"target">` (generic / VHLO forms).
_CUSTOM_CALL_PRETTY = re.compile(r'stablehlo\.custom_call\s+@(?:"([^"]+)"|([\w$.\-]+))')
_CUSTOM_CALL_GENERIC = re.compile(
    r'call_target_name\s*=\s*(?:#vhlo\.string_v1<)?"([^"]+)"')
_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class SavedModelReadError(ValueError):
    """The directory is not a readable SavedModel (missing, or a corrupt saved_model.pb)."""


@dataclasses.dataclass(frozen=True)
class TensorReport:
    """One named input or output of a signature.

    Attributes:
      name: the signature key, e.g. "images".
      dtype: the numpy-style dtype name, e.g. "float32".
      shape: the static shape from the SignatureDef, None for a dimension left open
        (polymorphic); the whole shape is None when even the rank is unknown.
      tensor_name: the graph tensor the TF1 session path feeds or fetches, e.g.
        "serving_default_images:0".
      polymorphic_shape: the polymorphic shape string recorded by jax2tf-native (e.g.
        "(b, 28, 28, 1)"), None without our manifest.
    """
    name: str
    dtype: str
    shape: tuple[int | None, ...] | None
    tensor_name: str
    polymorphic_shape: str | None = None

    @property
    def polymorphic_dims(self) -> tuple[int, ...]:
        """Indices of the dimensions left open, e.g. (0,) for a polymorphic batch."""
        return () if self.shape is None else tuple(i for i, d in enumerate(self.shape)
                                                   if d is None)

    def describe(self) -> str:
        if self.shape is None:
            dims = "<unknown rank>"
        else:
            dims = "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        text = f"{self.name}: {self.dtype}{dims}"
        if self.polymorphic_shape:
            text += f"  (polymorphic_shapes {self.polymorphic_shape!r})"
        return text


@dataclasses.dataclass(frozen=True)
class SignatureReport:
    """A SignatureDef: an entry point TF Serving (and `loaded.signatures[...]`) can call.

    Attributes:
      name: the signature key, e.g. "serving_default".
      method_name: e.g. "tensorflow/serving/predict" (may be empty in TF2-only models).
      inputs: the named inputs, sorted by name.
      outputs: the named outputs, sorted by name.
      reference_batch_sizes: batch sizes of the reference data jax2tf-native recorded for this
        signature (empty without our manifest).
      reference_source: "jax" or "tf": which computed the recorded outputs; None without.
      functions: the function-library functions this signature calls, transitively.
    """
    name: str
    method_name: str
    inputs: tuple[TensorReport, ...]
    outputs: tuple[TensorReport, ...]
    reference_batch_sizes: tuple[int, ...] = ()
    reference_source: str | None = None
    functions: tuple[str, ...] = ()

    @property
    def polymorphic_inputs(self) -> dict[str, tuple[int, ...]]:
        """{input name: open dimension indices} for the inputs with any."""
        return {t.name: t.polymorphic_dims for t in self.inputs if t.polymorphic_dims}


@dataclasses.dataclass(frozen=True)
class CustomCallReport:
    """One custom-call target found in a module.

    Attributes:
      target: the `call_target_name`.
      allowed: whether it is on jax2tf-native's allowlist (tf_ops/custom_call_allowlist.py).
      runs_in_tf: whether TF's XLA can execute it on at least one of the module's platforms.
      tf_runnable_platforms: the module platforms (lower case) on which TF can execute it.
      note: where the claim comes from, or why the target cannot run.
    """
    target: str
    allowed: bool
    runs_in_tf: bool
    tf_runnable_platforms: tuple[str, ...]
    note: str


@dataclasses.dataclass(frozen=True)
class TfSupport:
    """Which TF versions of the measured matrix can run a module (or all of a model's modules).

    Attributes:
      oldest_tf: the oldest TF version (e.g. "2.20") from which every newer TF in the matrix
        can run it; None when none can, or when it cannot be decided.
      reason: why that version (what limits older ones), or why none.
      by_version: {tf version: None if it can run it, else the reason it cannot}.
    """
    oldest_tf: str | None
    reason: str
    by_version: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ModuleReport:
    """One distinct StableHLO module held by XlaCallModule ops (de-duplicated by content).

    Attributes:
      sha256: hex digest of the module bytes (the identity used to de-duplicate).
      size_bytes: length of the serialized module.
      copies: how many XlaCallModule ops in the function library hold these exact bytes.
      calling_convention_version: the op's `version` attribute.
      platforms: the op's `platforms` attribute, e.g. ("CPU",).
      disabled_checks: the op's `disabled_checks` attribute.
      stablehlo_version: the StableHLO version in the artifact header (e.g. "1.13.7"); None if
        the module is not a StableHLO portable artifact.
      producer: the raw producer string of the header, e.g. "StableHLO_v1.13.7".
      deserializes_in_installed_tf: whether the installed TensorFlow could read the module.
      deserialize_error: the installed TF's diagnostic when it could not, else None.
      custom_calls: each distinct custom-call target in the module, sorted by name.
      main_signature: the `@main` function's signature line from the StableHLO text (argument and
        result types), None if the text is unavailable.
      functions: the function-library functions that contain an op with this module.
      signatures: the signatures that call (transitively) one of those functions; empty for
        modules reached otherwise, e.g. gradient functions used by `tf.GradientTape`.
      tf_support: the oldest TF version that can run it, from the version matrix.
      devices: the number of devices it was exported for (1 unless jax2tf-native recorded more
        on the op; sharded modules from other writers show their shardings only).
      input_shardings: per input the op takes, the XLA sharding of the `XlaSharding` op feeding
        it (e.g. "{devices=[2,1]0,1}"), None where unspecified.
      output_shardings: per output, the sharding of the `XlaSharding` op reading it, or None.
      multi_device_ops: ops that need its devices partitioned (shard_map, collectives).
      not_runnable_here: why TF on this host cannot run it (and the fix), None if it can.
      mlir: the StableHLO text, only when `inspect_saved_model(..., mlir=True)`.
    """
    sha256: str
    size_bytes: int
    copies: int
    calling_convention_version: int
    platforms: tuple[str, ...]
    disabled_checks: tuple[str, ...]
    stablehlo_version: str | None
    producer: str | None
    deserializes_in_installed_tf: bool
    deserialize_error: str | None
    custom_calls: tuple[CustomCallReport, ...]
    main_signature: str | None
    functions: tuple[str, ...]
    signatures: tuple[str, ...]
    tf_support: TfSupport
    devices: int = 1
    input_shardings: tuple[str | None, ...] = ()
    output_shardings: tuple[str | None, ...] = ()
    multi_device_ops: tuple[str, ...] = ()
    not_runnable_here: str | None = None
    mlir: str | None = None


@dataclasses.dataclass(frozen=True)
class VariableReport:
    """One variable in the checkpoint.

    Attributes:
      name: its checkpoint key without the "/.ATTRIBUTES/VARIABLE_VALUE" suffix (the object
        path, e.g. "params/dense/kernel").
      dtype: numpy-style dtype name.
      shape: its static shape.
      bytes: its size (element count x element size; 0 for strings, whose size is unknown).
    """
    name: str
    dtype: str
    shape: tuple[int, ...]
    bytes: int


@dataclasses.dataclass(frozen=True)
class SavedModelReport:
    """What a SavedModel holds, as read by `inspect_saved_model` (without JAX).

    Attributes:
      path: the SavedModel directory.
      tags: the MetaGraph tags inspected, e.g. ("serve",).
      saved_model_pb_bytes: size of saved_model.pb (the graph; parameters live in variables/).
      signatures: every SignatureDef except TF's internal "__saved_model_init_op", by name.
      modules: the distinct XlaCallModule modules, in order of first appearance.
      xla_call_module_ops: the number of XlaCallModule ops (copies included).
      variable_count: number of variables in the checkpoint.
      variable_bytes: their total size in bytes.
      variables: each variable, sorted by name.
      manifest: jax2tf-native's record (`manifest.Manifest`), None if the model has none.
      warmup_requests: one summary line per TF Serving warmup request in
        assets.extra/tf_serving_warmup_requests; None when the file is absent.
      tf_support: the oldest TF version that can run every module the signatures call (all
        modules when no signature reaches one), from the version matrix.
      tensorflow_version: the TF version that did the inspecting (it deserialized the modules).
      notes: anything inconsistent or noteworthy (e.g. manifest vs checkpoint disagreements, an
        unreadable warmup file).
    """
    path: str
    tags: tuple[str, ...]
    saved_model_pb_bytes: int
    signatures: tuple[SignatureReport, ...]
    modules: tuple[ModuleReport, ...]
    xla_call_module_ops: int
    variable_count: int
    variable_bytes: int
    variables: tuple[VariableReport, ...]
    manifest: manifest_lib.Manifest | None
    warmup_requests: tuple[str, ...] | None
    tf_support: TfSupport
    tensorflow_version: str
    notes: tuple[str, ...] = ()

    def signature(self, name: str) -> SignatureReport:
        for sig in self.signatures:
            if sig.name == name:
                return sig
        raise KeyError(f"no signature {name!r}; the model has {[s.name for s in self.signatures]}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def format(self) -> str:
        """A human-readable report (the `jax2tf-native inspect` output)."""
        return "\n".join(_format_lines(self)) + "\n"


# ---------------------------------------------------------------------------------------------
# Reading saved_model.pb

def check_contained(directory: Path) -> None:
    """Refuses a SavedModel with a symlink leading outside it (or a cycle), before any read.

    TF and our readers follow symlinks; one pointing outside would make `inspect`/`verify`
    read (and report on) files the directory's owner did not ship.

    Raises:
      SavedModelReadError: naming the link and where it leads.
    """
    root = directory.resolve()
    for current, dirs, files in os.walk(directory, followlinks=False):
        for name in dirs + files:
            path = Path(current) / name
            if not path.is_symlink():
                continue
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError):
                raise SavedModelReadError(
                    f"{path} is a broken or looping symlink. Fix: copy the SavedModel with its "
                    f"files (cp -rL), not with links.") from None
            if not target.is_relative_to(root):
                raise SavedModelReadError(
                    f"{path} is a symlink to {target}, outside the SavedModel directory {root}; "
                    f"refusing to read it. Fix: copy the files into the directory (cp -rL).")


def read_saved_model_proto(saved_model_dir: str | Path):
    """The parsed `SavedModel` proto of a directory.

    Raises:
      SavedModelReadError: the directory or saved_model.pb(txt) is missing, or does not parse.
    """

    directory = Path(saved_model_dir)
    if not directory.exists():
        raise SavedModelReadError(
            f"{directory} does not exist. Fix: pass the directory that contains saved_model.pb "
            f"(the one given to saved_model_tools.save or tf.saved_model.save).")
    if not directory.is_dir():
        raise SavedModelReadError(
            f"{directory} is a file, not a SavedModel directory. Fix: pass the directory that "
            f"contains saved_model.pb.")
    check_contained(directory)
    proto = saved_model_pb2.SavedModel()
    binary, text = directory / "saved_model.pb", directory / "saved_model.pbtxt"
    try:
        if binary.is_file():
            proto.ParseFromString(binary.read_bytes())
        elif text.is_file():
            text_format.Parse(text.read_text(), proto)
        else:
            found = sorted(p.name for p in directory.iterdir())[:10]
            raise SavedModelReadError(
                f"{directory} has no saved_model.pb (found: {found}). Fix: pass the SavedModel "
                f"directory itself, not its parent or its variables/ folder.")
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise SavedModelReadError(
            f"{directory}/saved_model.pb is corrupt: it does not parse as a SavedModel proto "
            f"({e}). Fix: re-export the model; a partial copy or a truncated download leaves "
            f"such a file.") from None
    if not proto.meta_graphs:
        raise SavedModelReadError(
            f"{directory}/saved_model.pb holds no MetaGraph (empty or truncated). Fix: re-export "
            f"the model.")
    return proto


def select_meta_graph(proto, tag: str = "serve"):
    """The MetaGraph tagged `tag` (TF Serving loads "serve"), else the only one."""
    for meta_graph in proto.meta_graphs:
        if tag in meta_graph.meta_info_def.tags:
            return meta_graph
    if len(proto.meta_graphs) == 1:
        return proto.meta_graphs[0]
    tags = [list(m.meta_info_def.tags) for m in proto.meta_graphs]
    raise SavedModelReadError(f"no MetaGraph tagged {tag!r}; the model has tag sets {tags}. "
                              f"Fix: re-export with tags=['serve'] for TF Serving.")


def _dtype_name(enum_value: int) -> str:
    try:
        return tf.dtypes.as_dtype(enum_value).name
    except TypeError:
        return f"<dtype enum {enum_value}>"


def _tensor_report(name: str, info, polymorphic_shape: str | None) -> TensorReport:
    if info.tensor_shape.unknown_rank:
        shape = None
    else:
        shape = tuple(None if d.size < 0 else int(d.size) for d in info.tensor_shape.dim)
    return TensorReport(name, _dtype_name(info.dtype), shape, info.name, polymorphic_shape)


def _function_edges(meta_graph) -> dict[str, set[str]]:
    """{function: functions it calls} from func-valued attributes and direct calls by op name."""
    library = {f.signature.name for f in meta_graph.graph_def.library.function}
    edges: dict[str, set[str]] = {}
    for fn in meta_graph.graph_def.library.function:
        called = edges.setdefault(fn.signature.name, set())
        for node in fn.node_def:
            called |= _called_functions(node, library)
    return edges


def _called_functions(node, library: set[str]) -> set[str]:
    called = {node.op} & library
    for attr in node.attr.values():
        if attr.HasField("func"):
            called.add(attr.func.name)
        elif attr.HasField("list"):
            called.update(f.name for f in attr.list.func)
    return called & library


def _signature_functions(meta_graph, signature_def, edges) -> tuple[str, ...]:
    """Functions reachable from the graph nodes that compute the signature's outputs."""
    library = set(edges)
    nodes = {n.name: n for n in meta_graph.graph_def.node}
    pending = [t.name.split(":")[0].lstrip("^") for t in signature_def.outputs.values()]
    seen_nodes: set[str] = set()
    functions: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen_nodes or name not in nodes:
            continue
        seen_nodes.add(name)
        node = nodes[name]
        functions |= _called_functions(node, library)
        pending.extend(i.split(":")[0].lstrip("^") for i in node.input)
    reached, stack = set(), list(functions)
    while stack:
        fn = stack.pop()
        if fn not in reached:
            reached.add(fn)
            stack.extend(edges.get(fn, ()))
    return tuple(sorted(reached))


# ---------------------------------------------------------------------------------------------
# Modules

def stablehlo_producer(module: bytes) -> str | None:
    """The producer string of an MLIR bytecode header ("StableHLO_v1.13.7"), None if not one."""
    if not module.startswith(_BYTECODE_MAGIC):
        return None
    pos = len(_BYTECODE_MAGIC)
    while pos < len(module) and module[pos] & 0x80:  # skip the bytecode version (a varint)
        pos += 1
    end = module.find(b"\x00", pos + 1)
    if end < 0:
        return None
    try:
        return module[pos + 1:end].decode("ascii")
    except UnicodeDecodeError:
        return None


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


class _Utf8Passthrough(bytes):
    """Bytes that `tf.mlir.experimental.run_pass_pipeline` accepts as its "text".

    The public wrapper calls `mlir_txt.encode('utf-8')` before handing the buffer to MLIR's
    parser, which also reads bytecode (it checks the "ML\\xefR" magic); binary bytecode is not
    UTF-8, so we hand the bytes through unchanged instead.
    """

    def encode(self, *_args, **_kwargs) -> bytes:
        return bytes(self)


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[list[str]]:
    """Captures what C++ writes to fd 2 (MLIR diagnostics) into the yielded list, on exit."""
    captured: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read().decode("utf-8", "replace"))


def module_text(module: bytes) -> tuple[str | None, str | None]:
    """(StableHLO text, None) of a serialized module, or (None, the installed TF's diagnostic).

    A portable artifact is deserialized by TF's StableHLO library (no JAX), then printed by TF's
    MLIR. Modules stored as MLIR text (calling conventions < 5 allowed it) are returned as is.
    """

    if not module.startswith(_BYTECODE_MAGIC):
        try:
            return module.decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "neither MLIR bytecode nor UTF-8 text"
    with native_stderr_captured() as diagnostics:
        try:
            bytecode = versions.deserialize_with_tf(module)
            if not bytecode:
                raise ValueError("deserialized to an empty module")
            text = tf.mlir.experimental.run_pass_pipeline(_Utf8Passthrough(bytecode), "", False)
            error = None
        except Exception as e:  # TF raises ValueError / UnknownError with MLIR's message.
            text, error = None, f"{type(e).__name__}: {e}"
    if error is not None:
        detail = " ".join(line.strip() for line in diagnostics[0].splitlines()
                          if "error" in line)[:600]
        return None, f"{error}{' (' + detail + ')' if detail else ''}"
    return text, None


def custom_call_targets(text: str) -> tuple[str, ...]:
    """The distinct custom-call targets named in StableHLO (pretty, generic or VHLO) text."""
    found = {a or b for a, b in _CUSTOM_CALL_PRETTY.findall(text)}
    found.update(_CUSTOM_CALL_GENERIC.findall(text))
    return tuple(sorted(found))


def _main_signature(text: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("func.func public @main(", "func.func @main(")):
            return stripped.rstrip(" {")
    return None


def custom_call_report(target: str, platforms: Sequence[str]) -> CustomCallReport:
    """Whether `target` is allowed and runs in TF on any of `platforms` (e.g. ("CPU",))."""
    entry = custom_call_allowlist.ALLOWLIST_BY_TARGET.get(target)
    lowered = tuple(p.lower() for p in platforms)
    if entry is None:
        return CustomCallReport(
            target, False, False, (),
            "not on jax2tf-native's allowlist (tf_ops/custom_call_allowlist.py): an opaque call "
            "into code TF may not have. jax2tf_native.convert refuses it unless its check is "
            "disabled.")
    runnable = tuple(p for p in lowered if entry.runs_in_tf_on(p))
    return CustomCallReport(target, True, bool(runnable), runnable, entry.note)


@functools.cache
def load_tf_version_matrix(path: str = str(TF_VERSION_MATRIX_FILE)) -> dict | None:
    """{tf version: info} from the measured matrix, None if the file is absent."""
    file = Path(path)
    if not file.is_file():
        return None
    raw = json.loads(file.read_text())
    return {version: entry["info"] for version, entry in raw["tf"].items()}


def _tf_blockers(info: dict, calling_convention: int, stablehlo_version: str | None) -> list[str]:
    reasons = []
    if calling_convention > info["max_calling_convention"]:
        reasons.append(f"runs calling conventions <= {info['max_calling_convention']}, the "
                       f"module uses {calling_convention}")
    if stablehlo_version is not None:
        have = _version_tuple(stablehlo_version)
        if have > _version_tuple(info["stablehlo_current"]):
            reasons.append(f"reads StableHLO <= {info['stablehlo_current']}, the module is "
                           f"{stablehlo_version}")
        elif have < _version_tuple(info["stablehlo_minimum"]):
            reasons.append(f"reads StableHLO >= {info['stablehlo_minimum']}, the module is "
                           f"{stablehlo_version}")
    return reasons


def tf_support(calling_convention: int, stablehlo_version: str | None,
               custom_calls: Sequence[CustomCallReport], matrix: dict | None) -> TfSupport:
    """The oldest TF version of the matrix that runs a module with these properties.

    The rule is conservative: a TF version qualifies when it runs the calling convention and
    reads the StableHLO version of the header (TF may still read newer artifacts whose ops all
    exist in its version, but nothing guarantees it), and every custom call runs in TF.

    Example:
        >>> tf_support(10, "1.13.7", (), load_tf_version_matrix()).oldest_tf
        '2.21'
    """
    if matrix is None:
        return TfSupport(None, f"no TF version matrix at {TF_VERSION_MATRIX_FILE}; run "
                               f"tools/tf_version_matrix.py to measure one")
    not_in_tf = [c.target for c in custom_calls if not c.runs_in_tf]
    if calling_convention < _MIN_CALLING_CONVENTION:
        return TfSupport(None, f"calling convention {calling_convention} is older than any TF "
                               f"runs (>= {_MIN_CALLING_CONVENTION})")
    ordered = sorted(matrix, key=_version_tuple)
    by_version = {}
    for version in ordered:
        reasons = _tf_blockers(matrix[version], calling_convention, stablehlo_version)
        if not_in_tf:
            reasons.append(f"custom calls TF's XLA cannot run: {', '.join(not_in_tf)}")
        by_version[version] = "; ".join(reasons) or None
    oldest = None
    for version in reversed(ordered):  # the oldest from which every newer version works
        if by_version[version] is not None:
            break
        oldest = version
    if oldest is None:
        newest = ordered[-1]
        return TfSupport(None, f"no TF in the matrix ({ordered[0]}..{newest}) qualifies; TF "
                               f"{newest}: {by_version[newest]}", by_version)
    index = ordered.index(oldest)
    if index == 0:
        reason = f"every TF in the matrix ({ordered[0]}..{ordered[-1]}) qualifies"
    else:
        previous = ordered[index - 1]
        reason = f"TF {previous} {by_version[previous]}"
        if "StableHLO" in by_version[previous]:
            reason += (f"; for TF {previous}, convert with jax2tf_native.convert(..., "
                       f"stablehlo_version={matrix[previous]['stablehlo_current']!r})")
    if stablehlo_version is None:
        reason += " (StableHLO version unknown: only the calling convention was checked)"
    return TfSupport(oldest, reason, by_version)


def _combined_support(supports: Sequence[TfSupport]) -> TfSupport:
    if not supports:
        return TfSupport(None, "the model has no XlaCallModule op: any TF that reads the "
                               "SavedModel format runs it (nothing to check here)")
    if any(s.oldest_tf is None for s in supports):
        worst = next(s for s in supports if s.oldest_tf is None)
        return TfSupport(None, worst.reason, worst.by_version)
    newest = max(supports, key=lambda s: _version_tuple(s.oldest_tf))
    return newest


# ---------------------------------------------------------------------------------------------
# Variables

def _variables(saved_model_dir: Path) -> tuple[VariableReport, ...]:
    prefix = saved_model_dir / "variables" / "variables"
    index = Path(str(prefix) + ".index")
    if not index.is_file():
        return ()
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        raise SavedModelReadError(
            f"{index} is corrupt: TF cannot read the checkpoint index "
            f"({' '.join(str(getattr(e, 'message', e)).split())[:200]}). Fix: re-export the "
            f"model; a partial copy or a truncated download leaves such a file.") from None
    keys = [k for k in shapes if k != _OBJECT_GRAPH_KEY]
    if any(k.endswith(_VARIABLE_SUFFIX) for k in keys):  # TF2 object-based checkpoint
        keys = [k for k in keys if k.endswith(_VARIABLE_SUFFIX)]
    _check_data_shards(prefix, sum(
        0 if dtypes[k] == tf.string else math.prod(int(d) for d in shapes[k]) * dtypes[k].size
        for k in keys))
    out = []
    for key in sorted(keys):
        dtype = dtypes[key]
        shape = tuple(int(d) for d in shapes[key])
        count = 1
        for d in shape:
            count *= d
        size = 0 if dtype == tf.string else count * dtype.size
        out.append(VariableReport(key.removesuffix(_VARIABLE_SUFFIX), dtype.name, shape, size))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The report

def _check_data_shards(prefix: Path, needed_bytes: int) -> None:
    """The checkpoint's data shards exist and hold at least the variables' bytes."""
    shards = sorted(prefix.parent.glob(prefix.name + ".data-*-of-*"))
    expected = 1
    if shards:
        match = re.search(r"-of-(\d+)$", shards[0].name)
        expected = int(match.group(1)) if match else 1
    if len(shards) < expected or not shards:
        raise SavedModelReadError(
            f"{prefix.parent} has {len(shards)} of the checkpoint's {expected} data file(s) "
            f"({prefix.name}.data-*-of-{expected:05d} missing). Fix: copy the complete "
            f"variables/ directory.")
    held = sum(p.stat().st_size for p in shards)
    if held < needed_bytes:
        raise SavedModelReadError(
            f"{prefix.parent}: the checkpoint's data files hold {held} bytes but its variables "
            f"need {needed_bytes} (truncated). Fix: copy the complete variables/ directory.")


def check_readable(saved_model_dir: str | Path):
    """Everything `verify` and `tflite` check before TF loads a model; returns its proto.

    The directory holds no symlink leading outside it, saved_model.pb parses, the checkpoint
    index reads and its data files are present and large enough, and jax2tf-native's manifest
    (when present) parses and agrees with the graph's signatures.

    Raises:
      SavedModelReadError: naming the file and what is wrong with it.

    Example:
        >>> check_readable("/tmp/model")
    """
    directory = Path(saved_model_dir)
    proto = read_saved_model_proto(directory)
    _variables(directory)
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
            info = graph_side[t.name]
            dtype = tf_dtypes.as_dtype(info.dtype).name
            shape = None if info.tensor_shape.unknown_rank else tuple(
                None if d.size < 0 else d.size for d in info.tensor_shape.dim)
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
        >>> report = inspect_saved_model("/tmp/model")
        >>> report.signature("serving_default").inputs[0].polymorphic_dims
        (0,)
        >>> print(report.format())
    """

    directory = Path(saved_model_dir)
    proto = read_saved_model_proto(directory)
    meta_graph = select_meta_graph(proto, tag)
    manifest = manifest_lib.read(directory)
    notes: list[str] = []
    edges = _function_edges(meta_graph)

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
            inputs=tuple(_tensor_report(k, sig_def.inputs[k], poly.get(k))
                         for k in sorted(sig_def.inputs)),
            outputs=tuple(_tensor_report(k, sig_def.outputs[k], None)
                          for k in sorted(sig_def.outputs)),
            reference_batch_sizes=tuple(r.batch_size for r in recorded.references)
            if recorded else (),
            reference_source=recorded.reference_source if recorded else None,
            functions=_signature_functions(meta_graph, sig_def, edges)))
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
        match = _STABLEHLO_PRODUCER.match(producer or "")
        text, error = module_text(module)
        if text is None and module.startswith(_BYTECODE_MAGIC):
            # The raw VHLO form still names the custom calls when deserialization fails.
            raw_text, _ = _raw_vhlo_text(module)
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
        devices = int(node.attr[_DEVICES_ATTR].i) if _DEVICES_ATTR in node.attr else 1
        multi_device = tuple(v.decode() for v in node.attr[_MULTI_DEVICE_OPS_ATTR].list.s)
        input_shardings, output_shardings = _shardings_around(node, entry["nodes"])
        modules.append(ModuleReport(
            sha256=digest, size_bytes=len(module), copies=entry["copies"],
            calling_convention_version=calling_convention, platforms=platforms,
            disabled_checks=disabled,
            stablehlo_version=match.group(1) if match else None, producer=producer,
            deserializes_in_installed_tf=text is not None, deserialize_error=error,
            custom_calls=custom_calls, main_signature=_main_signature(text) if text else None,
            functions=tuple(entry["functions"]), signatures=sig_names,
            tf_support=support, devices=devices, input_shardings=input_shardings,
            output_shardings=output_shardings, multi_device_ops=multi_device,
            not_runnable_here=runnable.problem_here(
                f"module sha256 {digest[:16]}", platforms, devices, multi_device,
                runnable.PLATFORM_CHECK in disabled),
            mlir=text if mlir else None))

    served = [m for m in modules if m.signatures] or modules
    model_support = _combined_support([m.tf_support for m in served])

    variables = _variables(directory)
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

    pb = directory / "saved_model.pb"
    return SavedModelReport(
        path=str(directory), tags=tuple(meta_graph.meta_info_def.tags),
        saved_model_pb_bytes=pb.stat().st_size if pb.is_file() else 0,
        signatures=tuple(signatures), modules=tuple(modules), xla_call_module_ops=op_count,
        variable_count=len(variables), variable_bytes=variable_bytes, variables=variables,
        manifest=manifest, warmup_requests=warmup_lines, tf_support=model_support,
        tensorflow_version=tf.__version__, notes=tuple(notes))


# Written on XlaCallModule ops by tf_ops.xla_call_module (that module imports JAX; these names
# are checked equal by tests/saved_model_tools).
_DEVICES_ATTR = "_jax2tf_native_devices"
_SHARDY_UNKNOWN = "dialect 'sdy' is unknown"
_MULTI_DEVICE_OPS_ATTR = "_jax2tf_native_multi_device_ops"


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


def _raw_vhlo_text(module: bytes) -> tuple[str | None, str | None]:
    with native_stderr_captured():
        try:
            return tf.mlir.experimental.run_pass_pipeline(_Utf8Passthrough(module), "",
                                                          False), None
        except Exception as e:  # MLIR parse failure: nothing more to learn from the bytes.
            return None, str(e)


# ---------------------------------------------------------------------------------------------
# Text output

def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"


def _format_lines(report: SavedModelReport) -> list[str]:
    lines = [f"SavedModel {report.path}  (tags {list(report.tags)}, saved_model.pb "
             f"{_size(report.saved_model_pb_bytes)})"]
    m = report.manifest
    if m is None:
        lines.append("  no jax2tf-native manifest (not written by saved_model_tools.save): no "
                     "reference data")
    else:
        producer = ", ".join(f"{k} {v}" for k, v in sorted(m.producer.items()))
        scope = "" if m.input_gradients else ", parameters only"
        lines.append(f"  written by jax2tf-native at {m.created_utc} ({producer}); gradients: "
                     f"{m.with_gradient} ({m.gradient_mode}{scope})")
        if m.target_tf is not None:
            lines.append(f"  written for TF {m.target_tf} (target_tf; StableHLO "
                         f"{m.stablehlo_version})")
    lines.append(f"Signatures ({len(report.signatures)}):")
    for sig in report.signatures:
        lines.append(f"  {sig.name}  [{sig.method_name or 'no method name'}]")
        for t in sig.inputs:
            lines.append(f"    in   {t.describe()}")
        for t in sig.outputs:
            lines.append(f"    out  {t.describe()}")
        poly = sig.polymorphic_inputs
        if poly:
            lines.append("    polymorphic dims: " + ", ".join(
                f"{k}{list(v)}" for k, v in sorted(poly.items())))
        if sig.reference_batch_sizes:
            lines.append(f"    references at batch sizes {list(sig.reference_batch_sizes)} "
                         f"(outputs computed by {sig.reference_source})")
    lines.append(f"Variables: {report.variable_count}, {_size(report.variable_bytes)}")
    lines.append(f"XlaCallModule: {len(report.modules)} distinct module(s) in "
                 f"{report.xla_call_module_ops} op(s)")
    for i, mod in enumerate(report.modules, 1):
        version = mod.stablehlo_version or f"unknown ({mod.producer or 'not bytecode'})"
        lines.append(f"  [{i}] sha256 {mod.sha256[:16]}  {_size(mod.size_bytes)}, calling "
                     f"convention {mod.calling_convention_version}, platforms "
                     f"{list(mod.platforms)}, StableHLO {version}, {mod.copies} cop"
                     f"{'y' if mod.copies == 1 else 'ies'}")
        lines.append(f"      functions: {', '.join(mod.functions) or '(top-level graph)'}")
        callers = ", ".join(mod.signatures) or "none (e.g. a gradient function)"
        lines.append(f"      called by signatures: {callers}")
        if mod.main_signature:
            lines.append(f"      {mod.main_signature}")
        if mod.disabled_checks:
            lines.append(f"      disabled checks: {list(mod.disabled_checks)}")
        if mod.devices != 1 or any(mod.input_shardings) or any(mod.output_shardings):
            multi = (f"; needs them partitioned: {', '.join(mod.multi_device_ops)}"
                     if mod.multi_device_ops else "")
            lines.append(f"      devices: {mod.devices}{multi}")
            lines.extend(f"      in  [{k}] sharding {s or 'unspecified'}"
                         for k, s in enumerate(mod.input_shardings))
            lines.extend(f"      out [{k}] sharding {s or 'unspecified'}"
                         for k, s in enumerate(mod.output_shardings))
        if mod.not_runnable_here:
            lines.append(f"      cannot run on this host: {mod.not_runnable_here}")
        if not mod.deserializes_in_installed_tf and _SHARDY_UNKNOWN in (mod.deserialize_error
                                                                        or ""):
            lines.append("      StableHLO text: not shown (TF's Python MLIR reader lacks the "
                         "Shardy dialect of this sharded module; XlaCallModule reads it)")
        elif not mod.deserializes_in_installed_tf:
            lines.append(f"      the installed TF cannot read it: {mod.deserialize_error}")
        if mod.custom_calls:
            lines.append("      custom calls:")
            for call in mod.custom_calls:
                status = ("allowed" if call.allowed else "NOT ALLOWED") + ", " + (
                    f"runs in TF on {', '.join(call.tf_runnable_platforms)}"
                    if call.runs_in_tf else "does NOT run in TF")
                lines.append(f"        {call.target}: {status}")
        else:
            lines.append("      custom calls: none")
        lines.append(f"      oldest TF: {mod.tf_support.oldest_tf or 'none'} "
                     f"({mod.tf_support.reason})")
        if mod.mlir is not None:
            lines.append("      StableHLO:")
            lines.extend("        " + line for line in mod.mlir.rstrip().splitlines())
    lines.append(f"Oldest TF that runs the signatures: {report.tf_support.oldest_tf or 'none'} "
                 f"({report.tf_support.reason}; from {TF_VERSION_MATRIX_FILE.name}, inspected "
                 f"with TF {report.tensorflow_version})")
    if report.warmup_requests is None:
        lines.append("Warmup requests: none (TF Serving compiles on the first request)")
    else:
        lines.append(f"Warmup requests: {len(report.warmup_requests)}")
        lines.extend(f"  {line}" for line in report.warmup_requests)
    for note in report.notes:
        lines.append(f"Note: {note}")
    return lines
