"""The one walk over a parsed MLIR module's operations, and the one custom-call target reader.

Every check that looks inside a module (custom calls, composites, Shardy and multi-device ops,
shape assertions, TF-version features) walks it with `walk`, and reads a custom call's target
with `custom_call_target`; text dumps (what TF's own MLIR prints, without JAX) are read with
`custom_call_targets_in_text`. Imports neither JAX nor TF: it works on the objects of whichever
MLIR Python bindings parsed the module.
"""
from __future__ import annotations

import contextlib
import re
import threading
from typing import NamedTuple

CUSTOM_CALL = "stablehlo.custom_call"


def string_attribute(op, name: str) -> str:
    """The value of `op`'s string (or flat symbol reference) attribute `name`."""
    attribute = op.attributes[name]
    value = getattr(attribute, "value", None)  # the bindings downcast to StringAttr & co.
    return value if isinstance(value, str) else str(attribute).strip('"@')


class Op(NamedTuple):
    """One operation found by `walk`."""
    op: object          # the MLIR operation
    function: str       # `sym_name` of the enclosing `func.func` (its own, for a func.func)
    target: str | None  # `call_target_name` of a `stablehlo.custom_call`; None for other ops


_reused = threading.local()


@contextlib.contextmanager
def reusing_walks(op):
    """Within the block, `walk(op)` is computed once (per `with_functions`) and reused.

    The checks of one conversion each walk the module (custom calls, Shardy and multi-device
    ops, shape assertions, composites): seven walks of ~0.2 ms each for a small CNN, measured
    (issue 15, conversion time). `op` must not change inside the block; a caller that changes
    it (e.g. replacing composites) does so last.
    """
    previous = getattr(_reused, "walks", None)
    _reused.walks = (op, {})
    try:
        yield
    finally:
        _reused.walks = previous


def walk(op, with_functions: bool = False) -> list[Op]:
    """Every operation nested in `op` (a module's `.operation`, or any op), in program order.

    `with_functions`: read each `func.func`'s name into `Op.function` (else ""). Only the
    checks that report where an op is ask: reading a corrupt (non-UTF-8) name raises, and the
    module verifier's walk must not be the one that meets it.

    Regions are entered too: function bodies, and the bodies of `stablehlo.while`,
    `stablehlo.case`, reducers, ... Returns a list (not a generator): callers that change the
    module while iterating (e.g. replacing composites) see the ops as they were.
    """
    reused = getattr(_reused, "walks", None)
    if reused is not None and reused[0] == op:
        walks = reused[1]
        if with_functions not in walks:
            walks[with_functions] = _walk(op, with_functions)
        return list(walks[with_functions])
    return _walk(op, with_functions)


def _walk(op, with_functions: bool) -> list[Op]:
    found: list[Op] = []

    def visit(parent, function: str) -> None:
        for region in parent.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    name = child.name
                    if name == "func.func" and with_functions:
                        function_here = string_attribute(child, "sym_name")
                    else:
                        function_here = function
                    target = (string_attribute(child, "call_target_name")
                              if name == CUSTOM_CALL and "call_target_name" in child.attributes
                              else None)
                    found.append(Op(child, function_here, target))
                    visit(child, function_here)

    visit(op, "")
    return found


def custom_call_target(op) -> str | None:
    """The `call_target_name` of a `stablehlo.custom_call` op; None for any other op."""
    if op.name != CUSTOM_CALL or "call_target_name" not in op.attributes:
        return None
    return string_attribute(op, "call_target_name")


# `stablehlo.custom_call @target(` (pretty form, bare or quoted symbol) and
# `call_target_name = "target"` / `call_target_name = #vhlo.string_v1<"target">` (generic and
# VHLO forms, as TF's deserializer prints them).
_CUSTOM_CALL_PRETTY = re.compile(r'stablehlo\.custom_call\s+@(?:"([^"]+)"|([\w$.\-]+))')
_CUSTOM_CALL_GENERIC = re.compile(r'call_target_name\s*=\s*(?:#vhlo\.string_v1<)?"([^"]+)"')


def custom_call_targets_in_text(text: str) -> tuple[str, ...]:
    """The distinct custom-call targets named in StableHLO (pretty, generic or VHLO) text.

    Example:
        >>> custom_call_targets_in_text('%0 = stablehlo.custom_call @lapack_sgeqrf_ffi(%a)')
        ('lapack_sgeqrf_ffi',)
    """
    found = {a or b for a, b in _CUSTOM_CALL_PRETTY.findall(text)}
    found.update(_CUSTOM_CALL_GENERIC.findall(text))
    return tuple(sorted(found))
