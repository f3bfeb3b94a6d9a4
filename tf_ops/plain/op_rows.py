"""The op table's rows as the lowerings that look at other ops read them.

A window, scatter or sort lowering reads the ops of its body region (may they run on whole
tensors? is the body a sum? may a key apply this op?), and a custom call dispatches on its
target. Those answers are properties of each op's row in `op_table`; this module gives them to
the lowerings without importing `op_table` (which imports every lowering): `op_table`
registers its tables here when it is imported, before any lowering runs.
"""
from __future__ import annotations

_ROWS: dict = {}
_CUSTOM_CALLS: dict = {}


def register(rows: dict, custom_calls: dict) -> None:
    """Called once by `op_table` with its two tables."""
    _ROWS.update(rows)
    _CUSTOM_CALLS.update(custom_calls)


def row(name: str):
    """The `op_table.Lowering` of op `name`, or None."""
    return _ROWS.get(name)


def custom_call(target: str):
    """The `op_table.Lowering` of custom call target `target`, or None."""
    return _CUSTOM_CALLS.get(target)


def custom_call_targets() -> tuple[str, ...]:
    return tuple(_CUSTOM_CALLS)


def elementwise(name: str) -> bool:
    """Whether op `name` computes each element from the same elements of its operands."""
    found = _ROWS.get(name)
    return bool(found and found.elementwise)


def combiner(name: str) -> str | None:
    """"add", "multiply", "max", "min", "and", "or" or "xor" when `name(acc, x)` is that
    reduction as a reduce, window or scatter body; else None."""
    found = _ROWS.get(name)
    return found.combiner if found else None


def idempotent(name: str) -> bool:
    """Whether op(a, a) == a (max, min, and, or): overlapping folds may regroup it."""
    found = _ROWS.get(name)
    return bool(found and found.idempotent)


def sort_key(name: str) -> bool:
    """Whether a sort comparator may apply op `name` to its operands to form a key."""
    found = _ROWS.get(name)
    return bool(found and found.sort_key)
