"""The StableHLO of an XlaCallModule op, read with the installed TF (no JAX).

The producer string of the bytecode header (the StableHLO version), the module's text as TF's
StableHLO library deserializes it, and the custom-call targets it names (with whether TF can
run them, from `tf_ops.custom_call_allowlist`).
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from typing import Iterator, Sequence

import tensorflow as tf

from saved_model_tools.inspect.report import CustomCallReport
from tf_ops import custom_call_allowlist, mlir_walk, versions

BYTECODE_MAGIC = b"ML\xefR"
STABLEHLO_PRODUCER = re.compile(r"^StableHLO_v(\d+\.\d+\.\d+)$")
# jax2tf_native.lapack_rewrite names the portable function replacing a LAPACK custom call
# `_lapack_portable<K>_<k>_<target>_main` (its module surgery); no JAX is needed to read it.
_REWRITTEN_LAPACK = re.compile(
    r'func\.func private @"?_lapack_portable\d+_\d+_(lapack_\w+?_ffi)_main\b')


def rewritten_lapack_targets(text: str) -> tuple[str, ...]:
    """The LAPACK targets `jax2tf_native.lapack_rewrite` replaced in a module's text, sorted."""
    return tuple(sorted(set(_REWRITTEN_LAPACK.findall(text or ""))))


def stablehlo_producer(module: bytes) -> str | None:
    """The producer string of an MLIR bytecode header ("StableHLO_v1.13.7"), None if not one."""
    if not module.startswith(BYTECODE_MAGIC):
        return None
    pos = len(BYTECODE_MAGIC)
    while pos < len(module) and module[pos] & 0x80:  # skip the bytecode version (a varint)
        pos += 1
    end = module.find(b"\x00", pos + 1)
    if end < 0:
        return None
    try:
        return module[pos + 1:end].decode("ascii")
    except UnicodeDecodeError:
        return None


class _Utf8Passthrough(bytes):
    """Bytes that `tf.mlir.experimental.run_pass_pipeline` accepts as its "text".

    The public wrapper calls `mlir_txt.encode('utf-8')` before handing the buffer to MLIR's
    parser, which also reads bytecode (it checks the "ML\\xefR" magic); binary bytecode is not
    UTF-8, so we hand the bytes through unchanged instead.
    """

    def encode(self, *_args, **_kwargs) -> bytes:
        return bytes(self)


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[list[str]]:
    """Captures what C++ writes to fd 2 (MLIR diagnostics) into the yielded list, on exit."""
    captured: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read().decode("utf-8", "replace"))


def module_text(module: bytes) -> tuple[str | None, str | None]:
    """(StableHLO text, None) of a serialized module, or (None, the installed TF's diagnostic).

    A portable artifact is deserialized by TF's StableHLO library (no JAX), then printed by TF's
    MLIR. Modules stored as MLIR text (calling conventions < 5 allowed it) are returned as is.
    """

    if not module.startswith(BYTECODE_MAGIC):
        try:
            return module.decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "neither MLIR bytecode nor UTF-8 text"
    with native_stderr_captured() as diagnostics:
        try:
            bytecode = versions.deserialize_with_tf(module)
            if not bytecode:
                raise ValueError("deserialized to an empty module")
            text = tf.mlir.experimental.run_pass_pipeline(_Utf8Passthrough(bytecode), "", False)
            error = None
        except Exception as e:  # TF raises ValueError / UnknownError with MLIR's message.
            text, error = None, f"{type(e).__name__}: {e}"
    if error is not None:
        detail = " ".join(line.strip() for line in diagnostics[0].splitlines()
                          if "error" in line)[:600]
        return None, f"{error}{' (' + detail + ')' if detail else ''}"
    return text, None


def custom_call_targets(text: str) -> tuple[str, ...]:
    """The distinct custom-call targets named in StableHLO (pretty, generic or VHLO) text."""
    return mlir_walk.custom_call_targets_in_text(text)


def main_signature(text: str) -> str | None:
    """The `func.func @main(...)` line of a module's text (its signature), None if absent."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("func.func public @main(", "func.func @main(")):
            return stripped.rstrip(" {")
    return None


def custom_call_report(target: str, platforms: Sequence[str]) -> CustomCallReport:
    """Whether `target` is allowed and runs in TF on any of `platforms` (e.g. ("CPU",))."""
    entry = custom_call_allowlist.ALLOWLIST_BY_TARGET.get(target)
    lowered = tuple(p.lower() for p in platforms)
    if entry is None:
        return CustomCallReport(
            target, False, False, (),
            "not on jax2tf-native's allowlist (tf_ops/custom_call_allowlist.py): an opaque call "
            "into code TF may not have. jax2tf_native.convert refuses it unless its check is "
            "disabled.")
    runnable = tuple(p for p in lowered if entry.runs_in_tf_on(p))
    return CustomCallReport(target, True, bool(runnable), runnable, entry.note)



def raw_vhlo_text(module: bytes) -> tuple[str | None, str | None]:
    """(TF's MLIR text of the serialized module, None) or (None, the parse error), with
    MLIR's native diagnostics kept off stderr."""
    with native_stderr_captured():
        try:
            return tf.mlir.experimental.run_pass_pipeline(_Utf8Passthrough(module), "",
                                                          False), None
        except Exception as e:  # MLIR parse failure: nothing more to learn from the bytes.
            return None, str(e)
