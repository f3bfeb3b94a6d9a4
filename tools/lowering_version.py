"""Which lowering a batch ran on, so that a run resumed across sessions counts as one run only
while nothing that decides the converted paths' values changed: a hash of the sources under
`tf_ops/` and `jax2tf_native/` and of the pinned stack's versions (jax, jaxlib, TF)."""
from __future__ import annotations

import collections
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


def stamp() -> dict:
    """What each record of a run carries: {"lowering": fingerprint(), "commit": commit()}."""
    return {"lowering": fingerprint(), "commit": commit()}


def foreign(records: list[dict]) -> list[dict]:
    """The records run on another lowering than this checkout's (records of a failure, which
    ran nothing, aside): a run or soak must not be resumed onto them."""
    here = fingerprint()
    return [r for r in records if not r.get("failed") and r.get("lowering") != here]


def commits_of(records: list[dict]) -> str:
    return ", ".join(sorted({str(r.get("commit", "unrecorded")) for r in records}))


def describe(records: list[dict], unit: str) -> str:
    """A summary line: the lowering(s) the records (one per `unit`: "batch", "case") ran on,
    with their commits."""
    by = collections.Counter((r.get("lowering", "unrecorded"), r.get("commit", "unrecorded"))
                             for r in records)
    lowerings = {lowering for lowering, _ in by}
    commits = ", ".join(f"{c} ({n} {unit}{'es' if unit.endswith('h') else 's'})"
                        for (_, c), n in sorted(by.items()))
    if len(lowerings) == 1:
        return (f"- lowering: every {unit} on one lowering, `{next(iter(lowerings))}` "
                f"(tf_ops/, jax2tf_native/ and the stack's versions); commits {commits}")
    return f"- **lowering: {unit}{'es' if unit.endswith('h') else 's'} on {len(lowerings)} " \
           f"lowerings**: {commits}"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"
