"""Whether TensorFlow on this host can run a module, decided without running it.

Two things can stop a module here, and both are common when exporting on a CPU machine for a
TPU/GPU fleet:

- its platforms: a module lowered only for "tpu" or "cuda" cannot run on TF's CPU device;
- its devices: a module exported over an N-device mesh that holds manual-sharding ops or
  collectives (`shard_map`, `psum`, ...) needs N devices partitioned by XLA's SPMD partitioner,
  which TF runs only inside TPU/GPU computations. A module whose shardings are annotations only
  (jit in/out shardings, sharding constraints) computes the same values on one device, and TF's
  CPU runs it as one device.

Such modules still convert, trace and save (they are meant to be served elsewhere); the error
comes when the op would run here, naming both sides and the fix.
"""
from __future__ import annotations

import functools
from typing import Sequence

import tensorflow as tf

from tf_ops import mlir_walk

# Node attributes that tf_ops.xla_call_module writes on XlaCallModule ops: what a reader of the
# graph cannot get from the module without JAX (TF's Python MLIR cannot parse Shardy modules).
DEVICES_ATTR = "_jax2tf_native_devices"
MULTI_DEVICE_OPS_ATTR = "_jax2tf_native_multi_device_ops"

# Imports no JAX: saved_model_tools.inspect uses it on serving hosts without JAX.

# `str(jax.export.DisabledSafetyCheck.platform())`, the `disabled_checks` entry that lets a
# module run on any platform (tests/tf_ops pin the equality).
PLATFORM_CHECK = "platform"

# Ops that only mean something when the module is partitioned over several devices.
MULTI_DEVICE_OPS = frozenset({
    "sdy.manual_computation", "stablehlo.all_reduce", "stablehlo.all_gather",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.reduce_scatter", "stablehlo.partition_id", "stablehlo.replica_id",
})
# Custom calls of shard_map (Shardy off, and Shardy's export form).
MULTI_DEVICE_CUSTOM_CALLS = frozenset({
    "SPMDFullToShardShape", "SPMDShardToFullShape",
    "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
})


def multi_device_ops(module) -> tuple[str, ...]:
    """Names of the ops in `module` (an MLIR `ir.Module`) that need a partitioned multi-device
    run (sorted, unique)."""
    found = set()
    for op, _, target in mlir_walk.walk(module.operation):
        if op.name in MULTI_DEVICE_OPS:
            found.add(op.name)
        elif target in MULTI_DEVICE_CUSTOM_CALLS:
            found.add(f"custom_call @{target}")
    return tuple(sorted(found))


@functools.cache
def tf_accelerator_platforms() -> tuple[str, ...]:
    """The accelerator platforms TF can see on this host ("cuda"/"tpu"), empty on a CPU host."""
    found = []
    if tf.config.list_logical_devices("GPU"):
        found.append("cuda")
    if tf.config.list_logical_devices("TPU"):
        found.append("tpu")
    return tuple(found)


def host_description() -> str:
    accelerators = tf_accelerator_platforms()
    if not accelerators:
        return "TensorFlow on this host has only a CPU device"
    return f"TensorFlow on this host sees accelerators {accelerators}"


def problem_here(fun_name: str, platforms: Sequence[str], nr_devices: int,
                 multi_device: Sequence[str], platform_check_disabled: bool) -> str | None:
    """Why TF on this host cannot run the module, with the fix; None when it can.

    Only the certain cases are decided: with an accelerator TF's placement decides and
    XlaCallModule itself checks.

    Example:
        >>> problem_here("f", ("tpu",), 1, (), False)
        "The current platform CPU is not among the platforms required by the module: [TPU]. ..."
    """
    if tf_accelerator_platforms():
        return None
    platforms = tuple(p.lower() for p in platforms)
    if "cpu" not in platforms and not platform_check_disabled:
        # Starts with the XlaCallModule op's own sentence, which jax2tf users see (and match).
        required = ", ".join(p.upper() for p in platforms)
        return (f"The current platform CPU is not among the platforms required by the module: "
                f"[{required}]. '{fun_name}' was exported for platforms {platforms}, but "
                f"{host_description()}, so it would run on 'cpu'. The module converts, traces "
                f"and saves here; it runs where TF has the exported accelerator. Fix: run it on "
                f"a host with {' or '.join(platforms)} (under a TPU/GPU tf.distribute strategy "
                f"when it is sharded), or export with 'cpu' among the platforms (e.g. "
                f"platforms=('cpu', {platforms[0]!r})) to run it here too.")
    if nr_devices > 1 and multi_device:
        return (f"'{fun_name}' was exported for {nr_devices} devices and holds "
                f"{', '.join(multi_device)} (shard_map or collectives), which need its "
                f"{nr_devices} devices partitioned by XLA's SPMD partitioner; "
                f"{host_description()}, where TF runs one device. The module converts, traces "
                f"and saves here. Fix: run it under a TPU/GPU tf.distribute strategy with "
                f"{nr_devices} devices, or export it without shard_map/collectives (jit "
                f"shardings and sharding constraints alone run on one device here).")
    return None


def platforms_that_may_run(platforms: Sequence[str]) -> tuple[str, ...]:
    """The exported platforms a module with a `problem_here` may still run on elsewhere."""
    return tuple(p.lower() for p in platforms if p.lower() != "cpu")
