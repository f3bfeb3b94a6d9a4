"""Platform names, and which accelerator platforms TensorFlow sees on this host."""
from __future__ import annotations

import functools
from typing import Sequence

import tensorflow as tf

# Names JAX uses in `Exported.platforms`, and the XLA platform names XlaCallModule expects.
JAX_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def canonical_platforms(platforms: Sequence[str] | str | None) -> tuple[str, ...] | None:
    """Validates user platform names ("cpu", "cuda", "rocm", "tpu"); "gpu" means "cuda".

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
                        f"Fix: e.g. platforms=('cpu', 'cuda').") from None
    names = ["cuda" if p == "gpu" else p for p in names]
    unknown = [p for p in names if p not in JAX_PLATFORMS]
    if unknown or not names:
        raise ValueError(f"platforms must be a non-empty subset of {JAX_PLATFORMS}, got "
                         f"{tuple(platforms)!r} (unknown: {unknown}). Fix: e.g. "
                         f"platforms=('cpu', 'cuda').")
    return tuple(dict.fromkeys(names))


@functools.cache
def tf_accelerator_platforms() -> tuple[str, ...]:
    """The accelerator platforms TF can see on this host ("cuda"/"tpu"), empty on a CPU host."""
    found = []
    if tf.config.list_logical_devices("GPU"):
        found.append("cuda")
    if tf.config.list_logical_devices("TPU"):
        found.append("tpu")
    return tuple(found)
