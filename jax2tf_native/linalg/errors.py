"""The error raised when linear algebra cannot be exported portably, and its helpers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NonPortableLinalgError(ValueError):
    """A linear-algebra operation cannot be lowered to TF-runnable StableHLO.

    Attributes:
        primitive: name of the JAX primitive (e.g. ``"eig"``), or ``None`` when the
            problem was found by :func:`check_module_portable`.
        platforms: the export platforms.
        reason: why no portable lowering exists.
    """

    def __init__(self, primitive: str | None, platforms: Sequence[str],
                 reason: str, fix: str):
        self.primitive = primitive
        self.platforms = tuple(platforms)
        self.reason = reason
        where = ", ".join(self.platforms) or "?"
        if primitive:
            head = (f"jax.lax.linalg primitive '{primitive}' cannot be exported for "
                    f"TensorFlow with linalg='portable' on platform(s) {where}")
        else:
            head = (f"the exported module (platform(s) {where}) cannot run in "
                    "TensorFlow")
        super().__init__(f"{head}: {reason}. {fix}")


NATIVE_FIX = ("Fix: avoid this operation in functions exported for "
               "TensorFlow, or export with linalg='native' if the module will "
               "only be run back in JAX (TF cannot run jaxlib's LAPACK calls).")


def raise_non_portable(ctx, primitive: str, reason: str, fix: str = NATIVE_FIX):
    platforms = tuple(getattr(ctx.module_context, "platforms", ()) or ())
    raise NonPortableLinalgError(primitive, platforms, reason, fix)


def require_static(ctx, primitive: str, *dims) -> None:
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        raise_non_portable(
            ctx, primitive,
            f"the matrix dimensions {tuple(str(d) for d in dims)} are symbolic; "
            "the portable algorithm unrolls over them",
            "Fix: make only the leading batch dimensions polymorphic "
            "(e.g. 'b, 4, 4'), keep the last two dimensions concrete.")


