"""Which XLA platform TensorFlow will run a module on, and the check against exported platforms."""
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


def check_runnable_here(exported_platforms: Sequence[str], platform_check_disabled: bool) -> None:
    """Raises ValueError when a module cannot run on any device TF has on this host.

    Only the certain case is decided here: a host whose TF sees no accelerator runs the module on
    CPU, so a module lowered without "cpu" cannot run. With accelerators TF's placement decides,
    and XlaCallModule itself checks.
    """
    if platform_check_disabled or tf_accelerator_platforms():
        return
    if "cpu" not in exported_platforms:
        raise ValueError(
            f"The module was exported for platforms {tuple(exported_platforms)}, but TensorFlow "
            f"on this host has only a CPU device, so it would run on 'cpu'. Fix: export with "
            f"platforms including 'cpu' (e.g. platforms=('cpu', 'cuda')), or run on a host with "
            f"the exported accelerator.")
