"""The reference .npz files in `assets.extra/jax2tf_native/`, written and read without JAX.

`.npz` keeps only numpy's own dtypes: an ml_dtypes array (bfloat16, float8_*, int4) comes back
as raw bytes (`|V2`). Such arrays are stored as unsigned integers of the same size, with their
dtype names in the extra entry `DTYPES_KEY` (a JSON object), and viewed back when read.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Mapping

import numpy as np
import tensorflow as tf  # TF knows ml_dtypes' names ("bfloat16") without importing JAX.

from saved_model_tools import manifest

DTYPES_KEY = "__dtype_names__"


def _numpy_dtype(name: str) -> np.dtype:
    return np.dtype(tf.dtypes.as_dtype(name).as_numpy_dtype)


def write(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Writes `arrays` (numpy or ml_dtypes dtypes) to the .npz file `path`.

    Example:
        >>> import tempfile, ml_dtypes
        >>> path = Path(tempfile.mkdtemp()) / "r.npz"
        >>> write(path, {"outputs/y": np.ones(2, ml_dtypes.bfloat16)})
        >>> read(path)["outputs/y"].dtype
        dtype(bfloat16)
    """
    stored, names = {}, {}
    for key, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind == "V":
            names[key] = value.dtype.name
            value = value.view(f"u{value.dtype.itemsize}")
        stored[key] = value
    if names:
        stored[DTYPES_KEY] = np.array(json.dumps(names, sort_keys=True))
    buffer = io.BytesIO()
    np.savez(buffer, **stored)
    Path(path).write_bytes(buffer.getvalue())


def read(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a reference file, with their recorded dtypes.

    Loaded through `manifest.load_npz`, which refuses pickles and members whose header declares
    more data than they hold (a hostile or corrupt file).

    Raises:
      manifest.ManifestError: the file is unreadable or its recorded dtype names are not valid.
    """

    arrays = manifest.load_npz(path)
    try:
        names = json.loads(str(arrays.pop(DTYPES_KEY))) if DTYPES_KEY in arrays else {}
        for key, name in dict(names).items():
            if key in arrays:
                arrays[key] = arrays[key].view(_numpy_dtype(name))
    except (ValueError, TypeError, AttributeError) as e:
        raise manifest.ManifestError(
            f"{path}: the recorded dtype names ({DTYPES_KEY}) are not valid ({type(e).__name__}: "
            f"{str(e)[:200]}). Fix: save the model again to rewrite its reference files.") from None
    return arrays
