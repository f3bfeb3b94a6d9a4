"""The records `inspect_saved_model` returns (what a SavedModel holds, as plain dataclasses) and
their text form (`jax2tf-native inspect` without --json)."""
from __future__ import annotations

import dataclasses
import json

from saved_model_tools import manifest as manifest_lib
from saved_model_tools.inspect.tf_version_matrix import TF_VERSION_MATRIX_FILE


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
        """One line: `name: dtype[dims]`, ? for an open dimension, and its polymorphic shape."""
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
      rewritten_lapack: the jaxlib LAPACK targets whose calls `call_exported`/`save_exported`
        replaced by portable StableHLO functions (`jax2tf_native.lapack_rewrite`), sorted.
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
    rewritten_lapack: tuple[str, ...] = ()


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
      lowering: how the model runs JAX's modules: "XlaCallModule" (needs TF's XLA) or "plain
        TF ops" (`enable_xla=False`, or a model with no XlaCallModule op: no XLA needed).
      op_types: every op type in the graph and its function library (gradients included),
        sorted.
      xla_op_types: those of `op_types` that need XLA (XlaCallModule, Xla*, _Xla*), and
        "_XlaCompile attribute" when a node is marked for XLA compilation.
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
    lowering: str = "XlaCallModule"
    op_types: tuple[str, ...] = ()
    xla_op_types: tuple[str, ...] = ()

    def signature(self, name: str) -> SignatureReport:
        """The report of signature `name` (KeyError naming the model's signatures if absent)."""
        for sig in self.signatures:
            if sig.name == name:
                return sig
        raise KeyError(f"no signature {name!r}; the model has {[s.name for s in self.signatures]}")

    def to_dict(self) -> dict:
        """The report as plain data (nested dicts, lists and scalars)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The report as JSON (the `inspect --json` output)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def format(self) -> str:
        """A human-readable report (the `jax2tf-native inspect` output)."""
        return "\n".join(format_lines(self)) + "\n"

# TF's Python MLIR reader lacks the Shardy dialect of sharded modules (XlaCallModule reads it).
SHARDY_UNKNOWN = "dialect 'sdy' is unknown"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"


def format_lines(report: SavedModelReport) -> list[str]:
    """The lines of the human-readable report (`SavedModelReport.format`)."""
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
    if report.lowering != "XlaCallModule":
        needs = (f"needs XLA: {', '.join(report.xla_op_types)}" if report.xla_op_types
                 else "nothing needs XLA")
        lines.append(f"Lowering: {report.lowering} ({len(report.op_types)} op types, {needs})")
        lines.append(f"  op types: {', '.join(report.op_types)}")
    else:
        lines.append("Lowering: XlaCallModule (runs where TF has XLA)")
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
        if not mod.deserializes_in_installed_tf and SHARDY_UNKNOWN in (mod.deserialize_error
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
        if mod.rewritten_lapack:
            lines.append(f"      LAPACK calls rewritten to portable StableHLO: "
                         f"{', '.join(mod.rewritten_lapack)}")
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
