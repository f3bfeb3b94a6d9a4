"""Raising `NonPortableLinalgError` from a lowering rule, with the fix.

The class itself is defined with our other errors (`jax2tf_native.errors`), so that importing
them loads no linear algebra.
"""

from __future__ import annotations

import jax

from jax2tf_native.errors import NonPortableLinalgError


NATIVE_FIX = ("Fix: avoid this operation in functions exported for "
               "TensorFlow, or export with linalg='native' if the module will "
               "only be run back in JAX (TF cannot run jaxlib's LAPACK calls).")


def raise_non_portable(ctx, primitive: str, reason: str, fix: str = NATIVE_FIX):
    platforms = tuple(getattr(ctx.module_context, "platforms", ()) or ())
    raise NonPortableLinalgError(primitive, platforms, reason, fix)


def lower_symbolic(ctx, primitive: str, lower):
    """Runs `lower()`; a size comparison the symbolic shapes cannot decide becomes our error.

    The portable algorithms branch on the matrix shape (m < n, m > n, ...). With a symbolic
    size the branch is taken when jax.export can decide it (e.g. "b, n, n": m == n), else
    jax raises InconclusiveDimensionOperation, which is reported here with the fix.
    """
    try:
        return lower()
    except jax.errors.InconclusiveDimensionOperation as e:
        shapes = ", ".join(str(tuple(str(d) for d in a.shape)) for a in ctx.avals_in)
        raise_non_portable(
            ctx, primitive,
            f"the operand shapes {shapes} are symbolic and the portable algorithm must "
            f"know how the matrix dimensions compare ({str(e).splitlines()[0]})",
            "Fix: give the matrix dimensions one symbol or a known relation (e.g. "
            "'b, n, n', or 'b, m, n' with constraints=['m >= n']), or make them concrete.")
