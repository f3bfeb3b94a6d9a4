"""The measured TF version matrix, read: which StableHLO versions and calling conventions each
TF version reads and runs (`data/tf_version_matrix.json`, measured by tools/tf_version_matrix.py).
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

# Measured by tools/tf_version_matrix.py; read, never edited, here.
TF_VERSION_MATRIX_FILE = Path(__file__).resolve().parents[1] / "data" / "tf_version_matrix.json"


def version_tuple(version: str) -> tuple[int, ...]:
    """A version string's numbers, for ordering ("2.17.1" -> (2, 17, 1))."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


@functools.cache
def load_tf_version_matrix(path: str = str(TF_VERSION_MATRIX_FILE)) -> dict | None:
    """{tf version: info} from the measured matrix, None if the file is absent."""
    file = Path(path)
    if not file.is_file():
        return None
    raw = json.loads(file.read_text())
    return {version: entry["info"] for version, entry in raw["tf"].items()}
