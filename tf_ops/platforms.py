"""Platform names: the one list of them, and their validation. Imports neither JAX nor TF."""
from __future__ import annotations

from typing import Sequence

# Names JAX uses in `Exported.platforms` (XlaCallModule takes them upper-case). The one
# definition: the allowlist, the custom-call check and the runnable-here probe use it.
JAX_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")

def canonical_platforms(platforms: Sequence[str] | str | None, fix: str | None = None,
                        keyword: str = "platforms") -> tuple[str, ...] | None:
    """Validates platform names ("cpu", "cuda", "rocm", "tpu"); "gpu" means "cuda".

    `keyword` is the argument name the caller used (e.g. "native_serialization_platforms"),
    which the error message says; `fix` ends it (default: an example with that keyword).

    Example:
        >>> canonical_platforms(["CPU", "gpu"])
        ('cpu', 'cuda')
    """
    if platforms is None:
        return None
    if fix is None:
        fix = f"Fix: e.g. {keyword}=('cpu', 'cuda')."
    if isinstance(platforms, str):
        platforms = (platforms,)
    try:
        names = [str(p).lower() for p in platforms]
    except TypeError:
        raise TypeError(f"{keyword} must be a sequence of platform names, got {platforms!r}. "
                        f"{fix}") from None
    names = ["cuda" if p == "gpu" else p for p in names]
    unknown = [p for p in names if p not in JAX_PLATFORMS]
    if unknown or not names:
        # "must be a sequence containing a subset of" is jax2tf's phrase for this error.
        raise ValueError(f"{keyword} must be a sequence containing a subset of {JAX_PLATFORMS}, "
                         f"got {tuple(platforms)!r} (unknown: {unknown}; {keyword} must be a "
                         f"non-empty subset). {fix}")
    return tuple(dict.fromkeys(names))
