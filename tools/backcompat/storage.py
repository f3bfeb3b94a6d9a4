"""Reads and writes one frozen back-compat artifact: a directory under tests/backcompat/data.

Layout of `<data_dir>/<name>/`:
  exported.bin   `jax.export.Exported.serialize()` bytes (the StableHLO module and its calling
                 convention, pytrees, avals, platforms, disabled checks).
  metadata.json  what made it and how to check it (see `Artifact`).
  data.npz       `in_<i>` inputs and `out_<i>` expected flat outputs; `bad_in_<i>` optional
                 inputs that must be rejected (e.g. by a shape assertion).
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import numpy as np

EXPORTED_FILE = "exported.bin"
METADATA_FILE = "metadata.json"
DATA_FILE = "data.npz"

# Bumped only if this layout changes; old artifacts stay readable.
FORMAT_VERSION = 1

DEFAULT_DATA_DIR = pathlib.Path(__file__).resolve().parents[2] / "tests" / "backcompat" / "data"


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One loaded artifact.

    Attributes:
      name: the directory name.
      serialized: the `Exported.serialize()` bytes.
      metadata: the parsed metadata.json: format_version, name, description,
        calling_convention_version, jax_version, jaxlib_version, created (UTC ISO date),
        platforms, custom_call_targets, tolerance {rtol, atol}, requires_x64, shardy.
      inputs: the flat inputs, in call order.
      expected: the flat expected outputs.
      bad_inputs: flat inputs that must be rejected, or None.
    """
    name: str
    serialized: bytes
    metadata: dict[str, Any]
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    bad_inputs: tuple[np.ndarray, ...] | None

    @property
    def rtol(self) -> float:
        return float(self.metadata["tolerance"]["rtol"])

    @property
    def atol(self) -> float:
        return float(self.metadata["tolerance"]["atol"])

    @property
    def custom_call_targets(self) -> tuple[str, ...]:
        return tuple(self.metadata["custom_call_targets"])


def _ordered(npz, prefix: str) -> tuple[np.ndarray, ...]:
    count = sum(1 for key in npz.files if key.startswith(prefix) and key[len(prefix):].isdigit())
    return tuple(npz[f"{prefix}{i}"] for i in range(count))


def write(directory: pathlib.Path, *, serialized: bytes, metadata: dict[str, Any],
          inputs, expected, bad_inputs=None) -> None:
    """Writes the three files into `directory` (created; must not hold an artifact yet unless
    the caller decided to overwrite)."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"in_{i}": np.asarray(x) for i, x in enumerate(inputs)}
    arrays.update({f"out_{i}": np.asarray(x) for i, x in enumerate(expected)})
    if bad_inputs is not None:
        arrays.update({f"bad_in_{i}": np.asarray(x) for i, x in enumerate(bad_inputs)})
    # Write the data before the metadata: a directory with metadata.json is a complete artifact.
    (directory / EXPORTED_FILE).write_bytes(bytes(serialized))
    np.savez(directory / DATA_FILE, **arrays)
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def exists(directory: pathlib.Path) -> bool:
    """True when `directory` holds a complete artifact."""
    return (directory / METADATA_FILE).is_file()


def read(directory: pathlib.Path) -> Artifact:
    """Loads the artifact in `directory`.

    Example:
        >>> artifact = read(DEFAULT_DATA_DIR / "stablehlo_sort")
        >>> jax.export.deserialize(artifact.serialized).call(*artifact.inputs)
    """
    if not exists(directory):
        raise FileNotFoundError(
            f"{directory} is not a back-compat artifact (no {METADATA_FILE}). Fix: generate it "
            f"with `python -m tools.backcompat generate --only {directory.name}`.")
    metadata = json.loads((directory / METADATA_FILE).read_text())
    with np.load(directory / DATA_FILE) as npz:
        inputs, expected = _ordered(npz, "in_"), _ordered(npz, "out_")
        bad = _ordered(npz, "bad_in_") or None
    return Artifact(directory.name, (directory / EXPORTED_FILE).read_bytes(), metadata,
                    inputs, expected, bad)


def read_all(data_dir: pathlib.Path = DEFAULT_DATA_DIR) -> list[Artifact]:
    """Every artifact under `data_dir`, by name."""
    if not data_dir.is_dir():
        return []
    return [read(d) for d in sorted(data_dir.iterdir()) if d.is_dir() and exists(d)]
