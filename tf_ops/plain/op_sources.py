"""Which lines of the user's JAX code became which TF op types in a plain graph.

A consumer that refuses a TF op (TF.js has no `LeftShift` kernel, TFLite's builtins no
`Cumprod`) names the op; the user needs the line of their JAX code it came from. While a
`recording()` is active, `interpreter.Context.emit` notes, for each StableHLO op it builds in a
graph, the span of graph ops it added and the op's source (`Op.source`: "model.py:12", or JAX's
op path when the location has no user file). `OpSources.by_op_type()` then maps each TF op type
to its sources. The span is read from `tf.Graph.version`, which counts the ops added to a graph
(ops are numbered in creation order, as `get_operations()` lists them), so recording costs two
attribute reads per op; nothing is recorded when no recording is active or when running eagerly.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

_ACTIVE: contextvars.ContextVar["OpSources | None"] = contextvars.ContextVar(
    "plain_op_sources", default=None)


class OpSources:
    """The spans noted while plain graphs were built, per graph.

    Example:
        >>> import jax, jax.numpy as jnp, tensorflow as tf
        >>> from tf_ops import plain
        >>> exp = jax.export.export(jax.jit(jnp.cumprod))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> program = plain.read_program(exp.mlir_module())
        >>> sources = OpSources()
        >>> with recording(sources):
        ...     _ = tf.function(lambda x: plain.run_program(program, [x])).get_concrete_function(
        ...         tf.TensorSpec((3,), tf.float32))
        >>> "Cumprod" in sources.by_op_type()
        True
    """

    def __init__(self):
        self._spans: dict[int, tuple[object, list]] = {}

    def note(self, graph, start: int, stop: int, source: str) -> None:
        """Graph ops number `start` (inclusive) to `stop` came from the op at `source`."""
        if stop > start:
            self._spans.setdefault(id(graph), (graph, []))[1].append((start, stop, source))

    def by_op_type(self, limit: int = 3) -> dict[str, tuple[str, ...]]:
        """TF op type -> up to `limit` distinct sources, user files ("m.py:3", without their
        directory) first, then JAX op paths ("jit(f)/tanh")."""
        found: dict[str, list[str]] = {}
        for graph, spans in self._spans.values():
            ops = graph.get_operations()
            owner: list[str | None] = [None] * len(ops)
            # Spans are noted when an op's lowering returns: an op built inside another's
            # (a called function's body) is noted first and keeps its own, nearer source; one
            # without a location takes the nearest enclosing op's (the call's).
            for start, stop, source in spans:
                if not source:
                    continue
                for index in range(start, min(stop, len(ops))):
                    if owner[index] is None:
                        owner[index] = source
            for op, source in zip(ops, owner):
                # The file's name, not its directory: the record ships with the model.
                if source and ".py:" in source:
                    source = os.path.basename(source)
                if source and source not in found.setdefault(op.type, []):
                    found[op.type].append(source)
        return {op_type: tuple(sorted(sources, key=lambda s: ".py:" not in s)[:limit])
                for op_type, sources in sorted(found.items()) if sources}


@contextlib.contextmanager
def recording(sources: OpSources | None) -> Iterator[None]:
    """Notes the plain graphs built while the block runs into `sources`; None notes nothing
    (so a caller writes one `with` for both lowerings)."""
    if sources is None:
        yield
        return
    token = _ACTIVE.set(sources)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> OpSources | None:
    """The recording in progress in this context, or None."""
    return _ACTIVE.get()
