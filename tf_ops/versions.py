"""What the installed TensorFlow can read: StableHLO version and XlaCallModule calling convention.

A module serialized by JAX must be (1) in a StableHLO version the consuming TF deserializes and
(2) in a calling-convention version its `XlaCallModule` kernel supports. JAX 0.10 writes StableHLO
newer than TF 2.21 reads (e.g. `vhlo.composite_v2`), so we re-serialize for the consumer.
"""
from __future__ import annotations

import functools
import re

from tensorflow.compiler.mlir.stablehlo import stablehlo as _tf_stablehlo
from tensorflow.compiler.tf2xla.python import xla as _tfxla

# TF's XlaCallModule kernel has accepted calling conventions from 4 on; older modules are
# rejected by the kernel itself.
TF_MINIMUM_CALLING_CONVENTION_VERSION = 4

_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


@functools.cache
def tf_stablehlo_version() -> str:
    """The StableHLO version the installed TF reads and writes, e.g. "1.13.7" for TF 2.21."""
    return _tf_stablehlo.get_current_version()


@functools.cache
def tf_minimum_stablehlo_version() -> str:
    """The oldest StableHLO version the installed TF can still target."""
    return _tf_stablehlo.get_minimum_version()


@functools.cache
def tf_maximum_calling_convention_version() -> int:
    """The newest XlaCallModule calling-convention version the installed TF runs (10 for 2.21)."""
    return int(_tfxla.call_module_maximum_supported_version())


def parse_stablehlo_version(version: str) -> tuple[int, int, int]:
    """Parses "1.13.7" into (1, 13, 7), or raises ValueError naming the expected form."""
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ValueError(f"stablehlo_version must look like '1.13.7', got {version!r}. Use the "
                         "version printed by tensorflow.compiler.mlir.stablehlo.stablehlo."
                         "get_current_version() on the TF that will run the model.")
    major, minor, patch = (int(p) for p in version.split("."))
    return major, minor, patch


def check_calling_convention_supported(version: int) -> None:
    """Raises ValueError when the installed TF cannot run a module of calling convention `version`."""
    low, high = TF_MINIMUM_CALLING_CONVENTION_VERSION, tf_maximum_calling_convention_version()
    if not low <= version <= high:
        raise ValueError(
            f"The module uses XlaCallModule calling-convention version {version}, but the "
            f"installed TensorFlow runs versions {low}..{high}. Fix: upgrade TensorFlow on the "
            f"host that runs the model, or export with a JAX whose calling convention is in "
            f"{low}..{high}.")


def deserialize_with_tf(module: bytes) -> str:
    """A portable artifact deserialized by the installed TF's StableHLO library (no JAX): MLIR
    bytecode in TF's own StableHLO version, returned as a str of bytes as TF's API does.

    Raises whatever TF raises for an artifact newer than it reads (ValueError/UnknownError).
    """
    return _tf_stablehlo.deserialize_portable_artifact_str(module)
