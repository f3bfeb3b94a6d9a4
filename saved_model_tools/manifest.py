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
import os
import zipfile
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
# A manifest larger than this is not ours (ours are a few KB): refuse before parsing it.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class ManifestError(ValueError):
    """jax2tf-native's records in a SavedModel are corrupt or lie (the message says which)."""


_RESAVE = ("Fix: re-save the model with saved_model_tools.save (the graph, manifest and "
           "reference files are written together); the directory was edited or corrupted.")
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


# How a model's modules run (`Manifest.lowering`): XlaCallModule ops, or plain TF ops.
LOWERINGS = ("xla_call_module", "plain")


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
      lowering: how the modules run: "xla_call_module" (one XlaCallModule op each, run by
        TF's XLA) or "plain" (`enable_xla=False`: ordinary TF ops, no XLA).
      plain_op_sources: with lowering "plain", each TF op type of the graphs -> up to three
        places in the user's JAX code it came from ("model.py:12", else JAX's op path), so
        that `tfjs` / `tflite` can point a refused op at the user's line; {} otherwise.
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
    lowering: str = "xla_call_module"
    plain_op_sources: dict = dataclasses.field(default_factory=dict)

    def signature(self, name: str) -> SignatureInfo:
        for sig in self.signatures:
            if sig.name == name:
                return sig
        raise KeyError(f"no signature {name!r}; the model has {[s.name for s in self.signatures]}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        """Parses and type-checks a manifest; raises ManifestError naming the bad field."""
        try:
            raw = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise ManifestError(f"{MANIFEST_FILE} is not valid JSON ({e}). {_RESAVE}") from None
        if not isinstance(raw, dict):
            raise ManifestError(f"{MANIFEST_FILE} holds a {type(raw).__name__}, not an object. "
                                f"{_RESAVE}")
        if raw.get("format_version") != FORMAT_VERSION:
            raise ManifestError(
                f"manifest format_version {raw.get('format_version')!r} is not "
                f"{FORMAT_VERSION}; written by another jax2tf_native version.")
        try:
            manifest = cls._from_dict(raw)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ManifestError(f"{MANIFEST_FILE} is malformed ({type(e).__name__}: {e}). "
                                f"{_RESAVE}") from None
        manifest._check_types()
        return manifest

    @classmethod
    def _from_dict(cls, raw: dict) -> "Manifest":
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
            target_tf=raw.get("target_tf"),
            lowering=raw.get("lowering", "xla_call_module"),
            plain_op_sources={k: tuple(v) for k, v in raw.get("plain_op_sources", {}).items()})

    def _check_types(self) -> None:
        def bad(what: str, value) -> ManifestError:
            return ManifestError(f"{MANIFEST_FILE}: {what} is {value!r}. {_RESAVE}")

        if self.lowering not in LOWERINGS:
            raise bad("lowering", self.lowering)
        for op_type, places in self.plain_op_sources.items():
            if not isinstance(op_type, str) or not all(isinstance(p, str) for p in places):
                raise bad(f"plain_op_sources[{op_type!r}]", places)
        for name in ("variable_count", "variable_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad(name, value)
        for sig in self.signatures:
            if not isinstance(sig.name, str):
                raise bad("a signature name", sig.name)
            for t in sig.inputs + sig.outputs:
                if not isinstance(t.name, str):
                    raise bad(f"signature {sig.name!r}: a tensor name", t.name)
                try:
                    np.dtype(t.dtype)
                except TypeError:
                    raise bad(f"signature {sig.name!r}: the dtype of {t.name!r}",
                              t.dtype) from None
                if any(d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < 0)
                       for d in t.shape):
                    raise bad(f"signature {sig.name!r}: the shape of {t.name!r}", t.shape)
            for ref in sig.references:
                reference_file_name(ref.file)
                if not isinstance(ref.batch_size, int) or isinstance(ref.batch_size, bool) \
                        or ref.batch_size < 1:
                    raise bad(f"signature {sig.name!r}: a reference batch_size", ref.batch_size)
                for tol in (ref.rtol, ref.atol):
                    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol < 0:
                        raise bad(f"signature {sig.name!r}: a reference tolerance", tol)


def reference_file_name(name) -> str:
    """`name` if it is a plain file name (no directories, no '..'), else ManifestError."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name
            or "\\" in name or "\0" in name or os.path.basename(name) != name):
        raise ManifestError(
            f"{MANIFEST_FILE} names reference file {name!r}, which is not a plain file name in "
            f"{RECORD_DIR}; reading it could reach outside the SavedModel. {_RESAVE}")
    return name


def reference_path(saved_model_dir: str | Path, name: str) -> Path:
    """The path of reference file `name`, refused if it (or a symlink) leads outside the dir."""
    root = Path(saved_model_dir).resolve()
    path = root / RECORD_DIR / reference_file_name(name)
    if not path.resolve().is_relative_to(root):
        raise ManifestError(f"reference file {path} resolves to {path.resolve()}, outside the "
                            f"SavedModel directory {root}. {_RESAVE}")
    return path


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz file, refusing pickles and arrays larger than their data.

    A corrupt or hostile header may declare a huge shape; each member's declared size is
    checked against its stored size before anything is allocated.

    Raises:
      ManifestError: the file is not a readable .npz, or a member lies about its size.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    shape, _, dtype = _read_header(member, version)
                    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if declared > info.file_size:
                        raise ManifestError(
                            f"{path}: member {info.filename} declares shape {shape} of "
                            f"{dtype} ({declared} bytes) but holds {info.file_size} bytes. "
                            f"{_RESAVE}")
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except ManifestError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as e:
        raise ManifestError(f"{path} is not a readable .npz file ({type(e).__name__}: "
                            f"{str(e)[:200]}). {_RESAVE}") from None


def _read_header(member, version):
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(member)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(member)
    raise ValueError(f"unsupported .npy format version {version}")


def read(saved_model_dir: str | Path) -> Manifest | None:
    """The manifest of a SavedModel, or None if jax2tf-native did not write one there."""
    root = Path(saved_model_dir).resolve()
    path = root / MANIFEST_FILE
    if not path.is_file():
        return None
    if not path.resolve().is_relative_to(root):
        raise ManifestError(f"{path} resolves to {path.resolve()}, outside the SavedModel "
                            f"directory {root}. {_RESAVE}")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path} is {path.stat().st_size} bytes, over the "
                            f"{MAX_MANIFEST_BYTES} a manifest may have. {_RESAVE}")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ManifestError(f"{path} is not UTF-8 text. {_RESAVE}") from None
    return Manifest.from_json(text)


def write(saved_model_dir: str | Path, manifest: Manifest) -> None:
    path = Path(saved_model_dir) / MANIFEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest.to_json())
