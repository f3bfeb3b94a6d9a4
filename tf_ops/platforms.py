"""Platform names: the one list of them, and their validation. Imports neither JAX nor TF."""
from __future__ import annotations

from typing import Sequence

# Names JAX uses in `Exported.platforms` (XlaCallModule takes them upper-case). The one
# definition: the allowlist, the custom-call check and the runnable-here probe use it.
JAX_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")

_FIX = "Fix: e.g. platforms=('cpu', 'cuda')."


def canonical_platforms(platforms: Sequence[str] | str | None,
                        fix: str = _FIX) -> tuple[str, ...] | None:
    """Validates platform names ("cpu", "cuda", "rocm", "tpu"); "gpu" means "cuda".

    `fix` ends the error message (what the caller should pass).

    Example:
        >>> canonical_platforms(["CPU", "gpu"])
        ('cpu', 'cuda')
    """
    if platforms is None:
        return None
    if isinstance(platforms, str):
        platforms = (platforms,)
    try:
        names = [str(p).lower() for p in platforms]
    except TypeError:
        raise TypeError(f"platforms must be a sequence of platform names, got {platforms!r}. "
                        f"{fix}") from None
    names = ["cuda" if p == "gpu" else p for p in names]
    unknown = [p for p in names if p not in JAX_PLATFORMS]
    if unknown or not names:
        raise ValueError(f"platforms must be a non-empty subset of {JAX_PLATFORMS}, got "
                         f"{tuple(platforms)!r} (unknown: {unknown}). {fix}")
    return tuple(dict.fromkeys(names))
