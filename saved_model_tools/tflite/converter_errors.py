"""The TFLite converter's errors as one line each, with the user's JAX line where the manifest
records it: the converter raises with whole MLIR dumps, and prints more on fd 2.
"""
from __future__ import annotations

import re
from pathlib import Path

_ERROR_LINE = re.compile(r"(?:^|\s)(?:(\S+:\d+:\d+): )?error: (.+)$")

def converter_error_lines(error: Exception) -> tuple[str, ...]:
    """The converter's distinct "location: message" error lines (it prints whole MLIR dumps)."""
    found = []
    raw_lines = str(error).splitlines()
    for index, raw in enumerate(raw_lines):
        match = _ERROR_LINE.search(raw)
        if match:
            location, message = match.groups()
            message = _without_mlir_location(message)
            if message.endswith(":"):
                # "failed while converting: 'main':" says what failed on the lines after it.
                ops = [l.strip() for l in raw_lines[index + 1:index + 6]
                       if l.strip().startswith(("TF Select ops:", "Flex ops:", "Custom ops:"))]
                message = f"{message} {'; '.join(ops)}" if ops else message.rstrip(":")
            line = f"{Path(location).name}: {message}" if location else message
            if line not in found:
                found.append(line)
    if not found:
        first = str(error).strip().splitlines()
        found.append(first[0][:300] if first else type(error).__name__)
    return tuple(found[:10])


_TF_OP = re.compile(r"'tf\.(\w+)'")


def with_sources(errors: tuple[str, ...], record) -> tuple[str, ...]:
    """Each line naming a TF op (`'tf.Cumprod' op is ...`) with the user's line it came from,
    as a plain model's manifest records it (`plain_op_sources`)."""
    sources = record.plain_op_sources if record is not None else {}
    annotated = []
    for line in errors:
        places = [p for op in _TF_OP.findall(line) for p in sources.get(op, ())]
        annotated.append(f"{line} (from {', '.join(dict.fromkeys(places))} in the JAX code)"
                         if places else line)
    return tuple(annotated)


def _without_mlir_location(message: str) -> str:
    """The message without a leading MLIR location: `loc(callsite(fused["Cumprod:", ...] at
    ...)): 'tf.Cumprod' op is ...` -> `'tf.Cumprod' op is ...` (the location names TF's graph
    nodes, not the user's code, and runs to hundreds of characters)."""
    message = message.strip()
    if not message.startswith("loc("):
        return message
    depth, quoted = 0, False
    for index, char in enumerate(message):
        if char == '"' and message[index - 1] != "\\":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
            if depth == 0:
                return message[index + 1:].lstrip(": ").strip() or message
    return message
