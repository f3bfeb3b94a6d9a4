"""The error of the plain-TF-ops lowering (`enable_xla=False`)."""
from __future__ import annotations


class PlainLoweringError(NotImplementedError):
    """A StableHLO op that `enable_xla=False` cannot write as ordinary TF ops exactly.

    A NotImplementedError, as jax2tf's old `enable_xla=False` raised for primitives it could
    not convert. Raised at conversion, before any graph or file is written; the message names
    the op, its element types, the user's source line and why, then the fix.
    """


def unsupported(op, why: str) -> PlainLoweringError:
    """Our error for `op` (a `program.Op`): what, where, which dtype, why, and the fix."""
    where = f" at {op.source}" if op.source else ""
    return PlainLoweringError(
        f"enable_xla=False cannot lower `{op.name}` ({op.dtype_text}){where} to plain "
        f"TensorFlow ops: {why}. Fix: convert with enable_xla=True (the default: one "
        f"XlaCallModule op, run by TF's XLA), or change the JAX code at that line.")
