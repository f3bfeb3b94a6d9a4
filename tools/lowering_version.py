"""Which lowering a batch ran on, so that a run resumed across sessions counts as one run only
while nothing that decides the converted paths' values changed: a hash of the sources under
`tf_ops/` and `jax2tf_native/` and of the pinned stack's versions (jax, jaxlib, TF)."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import subprocess
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
SOURCES = ("tf_ops", "jax2tf_native")
_PACKAGES = ("jax", "jaxlib", "tensorflow-cpu")


@functools.cache
def fingerprint() -> str:
    """12 hex digits: equal for two checkouts whose lowering sources and stack are equal."""
    digest = hashlib.sha256()
    for name in _PACKAGES:
        digest.update(f"{name}=={_version(name)}\n".encode())
    for source in SOURCES:
        for path in sorted((_REPO / source).rglob("*.py")):
            digest.update(str(path.relative_to(_REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def commit() -> str:
    """The checkout's commit, with "+changes" when the lowering sources differ from it."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=_REPO, capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--", *SOURCES) else "")


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"
