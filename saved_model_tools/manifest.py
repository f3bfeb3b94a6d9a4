"""What jax2tf-native records inside a SavedModel next to the TF graph (readable without JAX).

Layout, under the SavedModel directory:
  assets.extra/jax2tf_native/manifest.json    the `Manifest` below, as JSON
  assets.extra/jax2tf_native/<file>.npz       reference data: arrays "inputs/<name>" and
                                              "outputs/<name>" (JAX's outputs for those inputs)
  assets.extra/tf_serving_warmup_requests     TF Serving warmup (PredictionLog TFRecords)

`assets.extra/` is outside what TF loads, so these files never change how the model runs.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

FORMAT_VERSION = 1
RECORD_DIR = Path("assets.extra") / "jax2tf_native"
MANIFEST_FILE = RECORD_DIR / "manifest.json"
WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One named input or output of a signature.

    Attributes:
      name: the signature key (e.g. "images", "output_0").
      dtype: numpy dtype name, e.g. "float32", "uint8".
      shape: static shape, None for polymorphic dimensions.
      polymorphic_shape: the user's polymorphic shape string (e.g. "(b, 28, 28, 1)"), or None.
    """
    name: str
    dtype: str
    shape: tuple[int | None, ...]
    polymorphic_shape: str | None = None


@dataclasses.dataclass(frozen=True)
class Reference:
    """Inputs recorded at save time with JAX's outputs for them.

    Attributes:
      file: the .npz file name in RECORD_DIR (arrays "inputs/<name>", "outputs/<name>").
      batch_size: the size of the polymorphic batch dimension in this record.
      rtol, atol: the tolerance `verify` compares TF's outputs with.
    """
    file: str
    batch_size: int
    rtol: float
    atol: float


@dataclasses.dataclass(frozen=True)
class SignatureInfo:
    """A serving signature as saved.

    Attributes:
      name: the signature key, e.g. "serving_default".
      method_name: the SignatureDef method name, e.g. "tensorflow/serving/predict".
      inputs: the named inputs, in call order.
      outputs: the named outputs.
      references: reference records (at least two batch sizes when the batch is polymorphic;
        empty for signatures whose outputs JAX alone cannot compute, e.g. with TF pre-processing
        whose reference was computed in TF at save time: then `reference_source` says so).
      reference_source: "jax" (outputs computed by JAX) or "tf" (by TF at save time).
    """
    name: str
    method_name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    references: tuple[Reference, ...] = ()
    reference_source: str = "jax"


@dataclasses.dataclass(frozen=True)
class Manifest:
    """Everything jax2tf-native records about a SavedModel it wrote.

    Attributes:
      format_version: version of this record (FORMAT_VERSION when written).
      created_utc: ISO-8601 time of the save.
      producer: versions of jax, jaxlib, tensorflow and jax2tf_native that wrote the model.
      signatures: one entry per signature.
      variable_count: number of tf.Variables (the parameters).
      variable_bytes: their total size in bytes.
      with_gradient: whether the signatures carry gradients (for fine-tuning in TF).
      gradient_mode: "residuals" or "recompute" (see `jax2tf_native.convert`).
      platforms: the platforms the modules were lowered for.
      stablehlo_version: the StableHLO version the modules were serialized in.
      input_gradients: whether the inputs take gradients too, or the parameters only.
      target_tf: the TensorFlow version ("2.19") the modules were written for (`save`'s
        `target_tf`, the installed TF's by default); None in models written before the field.
    """
    format_version: int
    created_utc: str
    producer: dict
    signatures: tuple[SignatureInfo, ...]
    variable_count: int
    variable_bytes: int
    with_gradient: bool
    gradient_mode: str
    platforms: tuple[str, ...]
    stablehlo_version: str
    input_gradients: bool = True
    target_tf: str | None = None

    def signature(self, name: str) -> SignatureInfo:
        for sig in self.signatures:
            if sig.name == name:
                return sig
        raise KeyError(f"no signature {name!r}; the model has {[s.name for s in self.signatures]}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        raw = json.loads(text)
        if raw.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"manifest format_version {raw.get('format_version')!r} is not "
                             f"{FORMAT_VERSION}; written by another jax2tf_native version.")

        def tensor(d):
            return TensorInfo(d["name"], d["dtype"], tuple(d["shape"]), d.get("polymorphic_shape"))

        def signature(d):
            return SignatureInfo(
                d["name"], d["method_name"], tuple(map(tensor, d["inputs"])),
                tuple(map(tensor, d["outputs"])),
                tuple(Reference(**r) for r in d.get("references", ())),
                d.get("reference_source", "jax"))

        return cls(
            format_version=raw["format_version"], created_utc=raw["created_utc"],
            producer=dict(raw["producer"]),
            signatures=tuple(map(signature, raw["signatures"])),
            variable_count=raw["variable_count"], variable_bytes=raw["variable_bytes"],
            with_gradient=raw["with_gradient"], gradient_mode=raw["gradient_mode"],
            platforms=tuple(raw["platforms"]), stablehlo_version=raw["stablehlo_version"],
            # Models written before the field existed differentiate their inputs too.
            input_gradients=raw.get("input_gradients", True),
            target_tf=raw.get("target_tf"))


def read(saved_model_dir: str | Path) -> Manifest | None:
    """The manifest of a SavedModel, or None if jax2tf-native did not write one there."""
    path = Path(saved_model_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    return Manifest.from_json(path.read_text())


def write(saved_model_dir: str | Path, manifest: Manifest) -> None:
    path = Path(saved_model_dir) / MANIFEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest.to_json())
