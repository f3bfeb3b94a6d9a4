"""Skips re-writing a module when writing it for TF is known to change only its header.

JAX writes each module at its own StableHLO version (1.15.0 in JAX 0.10); TF 2.21 reads 1.13.7.
`module_for_tf.reserialize` parses JAX's bytes, checks them and writes them at the TF's version,
so that an op the TF lacks is named while converting rather than failing in TF. The write is the
costliest step of a conversion's own work: ~4 ms of ~8 ms for a small CNN, the conversion-time
gap to jax2tf, which hands JAX's bytes to TF unchanged (issue 15, measured).

For most modules the write changes nothing but the version in the header: every op, type and
attribute kind the module holds has the same VHLO form at both versions (a form depends on the
kind, not on values). Which kinds a module holds is therefore what decides it. The first module
of each kind is written and compared with JAX's bytes (header version replaced); when they are
equal, later modules of that kind take JAX's bytes with the header version replaced, which are
the bytes the write would have given.

Only for modules the caller does not rewrite (no composites replaced, no `target_tf` feature
rewrites; those depend on attribute values, not kinds).
"""
from __future__ import annotations

import threading
from typing import Iterable

_MAGIC = b"ML\xefR"
_PRODUCER_PREFIX = b"StableHLO_v"
# Kinds remembered per (JAX version, target version); bounded because a long-running process
# converting many different models must not grow without limit.
_MAX_KINDS = 512
_known: dict[tuple, bool] = {}
_lock = threading.Lock()


def producer_span(blob: bytes) -> tuple[int, int] | None:
    """(start, end) of "StableHLO_vX.Y.Z" in a portable artifact's header, else None.

    The header is MLIR bytecode's: the magic "ML\\xefR", the bytecode version (a varint), then
    the producer string, NUL-terminated.
    """
    if not blob.startswith(_MAGIC):
        return None
    i = len(_MAGIC)
    while i < len(blob) and blob[i] & 0x80:  # varint continuation bytes
        i += 1
    start = i + 1
    end = blob.find(b"\0", start)
    if end < 0 or not blob.startswith(_PRODUCER_PREFIX, start):
        return None
    return start, end


def with_version(blob: bytes, version: str) -> bytes | None:
    """`blob` with its header's StableHLO version replaced by `version`; None if no header."""
    span = producer_span(blob)
    if span is None:
        return None
    start, end = span
    return blob[:start] + _PRODUCER_PREFIX + version.encode() + blob[end:]


def module_kind(ops: Iterable) -> frozenset:
    """The op names, their attribute names and the element types a module holds.

    `ops`: `mlir_walk.walk(module.operation)`. Types come from op results and function
    arguments (a value is one or the other).
    """
    kind = set()
    for op, _, _ in ops:
        name = op.name
        kind.add(name)
        attributes = op.attributes
        for i in range(len(attributes)):
            kind.add((name, attributes[i].name))
        for value in op.results:
            kind.add(_element_type(value.type))
        if name == "func.func":
            for region in op.regions:
                for block in region.blocks:
                    for argument in block.arguments:
                        kind.add(_element_type(argument.type))
    return frozenset(kind)


def _element_type(t) -> str:
    element = getattr(t, "element_type", None)  # the bindings downcast shaped types
    return str(element) if element is not None else str(t)


def header_only(jax_bytes: bytes, target: str, kind: frozenset) -> bytes | None:
    """JAX's bytes with `target` in the header, if writing this kind is known to give them."""
    key = (_producer(jax_bytes), target, kind)
    if _known.get(key):
        return with_version(jax_bytes, target)
    return None


def record(jax_bytes: bytes, target: str, kind: frozenset, written: bytes) -> None:
    """Remembers whether writing a module of `kind` at `target` changed only its header."""
    key = (_producer(jax_bytes), target, kind)
    with _lock:
        if key in _known:
            return
        if len(_known) >= _MAX_KINDS:
            _known.clear()
        _known[key] = with_version(jax_bytes, target) == written


def _producer(blob: bytes) -> bytes | None:
    span = producer_span(blob)
    return blob[span[0]:span[1]] if span else None


def forget() -> None:
    """Forgets every kind (tests start from an empty table)."""
    with _lock:
        _known.clear()
