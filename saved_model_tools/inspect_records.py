"""The records `inspect_saved_model` returns: what a SavedModel holds, as plain dataclasses."""
from __future__ import annotations

import dataclasses
import json

from saved_model_tools import inspect_format
from saved_model_tools import manifest as manifest_lib
from saved_model_tools.inspect_tf_versions import TfSupport  # noqa: F401  (a field's type)


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
        return "\n".join(inspect_format.format_lines(self)) + "\n"
