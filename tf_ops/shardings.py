"""Marks TF tensors with the XLA shardings an exported module declares for its inputs/outputs,
and reads them back (`format_op_sharding`, used by saved_model_tools.inspect: no JAX here).

The module itself carries its shardings; the `XlaSharding` ops around the `XlaCallModule` op make
them visible to TF tools that read the graph (TF's TPU inference converter, TF's SPMD
partitioner), as jax2tf does. They are built only in graphs: eagerly they have no effect.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import tensorflow as tf
# Private TF: the only builder of the `XlaSharding` op and of its `_XlaSharding(V2)` attributes
# (tf.raw_ops has no XlaSharding). jax2tf uses the same module. Pinned by
# tests/tf_ops/test_shardings.py::test_private_tf_sharding_modules_are_where_we_expect.
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.python.compiler.xla.experimental import xla_sharding


def _tf_op_shardings(hlo_sharding, shardy: bool):
    """(V1 proto, V2 proto or None) as TF's `xla_data_pb2.OpSharding` for a JAX `HloSharding`.

    TF reads V1 shardings with explicit `tile_assignment_devices`; Shardy wants the V2 (iota)
    form as well.
    """
    proto = hlo_sharding.to_proto()
    if not proto.tile_assignment_devices and proto.iota_reshape_dims:
        devices = list(np.arange(math.prod(proto.tile_assignment_dimensions))
                       .reshape(proto.iota_reshape_dims)
                       .transpose(proto.iota_transpose_perm).flat)
    else:
        devices = list(proto.tile_assignment_devices)
    v1 = xla_data_pb2.OpSharding(
        type=int(proto.type),
        tile_assignment_dimensions=list(proto.tile_assignment_dimensions),
        tile_assignment_devices=[int(d) for d in devices],
        replicate_on_last_tile_dim=proto.replicate_on_last_tile_dim,
        last_tile_dims=list(proto.last_tile_dims))
    if not shardy:
        return v1, None
    v2 = xla_data_pb2.OpSharding(
        type=int(proto.type),
        tile_assignment_dimensions=list(proto.tile_assignment_dimensions),
        tile_assignment_devices=list(proto.tile_assignment_devices),
        iota_reshape_dims=list(proto.iota_reshape_dims),
        iota_transpose_perm=list(proto.iota_transpose_perm),
        replicate_on_last_tile_dim=proto.replicate_on_last_tile_dim,
        last_tile_dims=list(proto.last_tile_dims))
    return v1, v2


def shard(tensor: tf.Tensor, hlo_sharding, *, shardy: bool) -> tf.Tensor:
    """`tensor` through an `XlaSharding` op for `hlo_sharding` (None: unspecified, unchanged).

    Example:
        >>> class Tiled:   # stands for a JAX HloSharding (`Exported.in_shardings_hlo`)
        ...     def to_proto(self):
        ...         return xla_data_pb2.OpSharding(
        ...             type=xla_data_pb2.OpSharding.OTHER, tile_assignment_dimensions=[2],
        ...             tile_assignment_devices=[0, 1])
        >>> @tf.function
        ... def f(x):
        ...     return shard(x, Tiled(), shardy=False)
        >>> graph = f.get_concrete_function(tf.TensorSpec((8,))).graph
        >>> [op.type for op in graph.get_operations() if op.type == "XlaSharding"]
        ['XlaSharding']
    """
    if hlo_sharding is None:
        return tensor
    v1, v2 = _tf_op_shardings(hlo_sharding, shardy)
    return xla_sharding.Sharding(proto=v1).apply_to_tensor(
        tensor, use_sharding_op=True, sharding_v2_proto=v2)


def shard_all(tensors: Sequence[tf.Tensor], hlo_shardings: Sequence, *,
              shardy: bool) -> list[tf.Tensor]:
    return [shard(t, s, shardy=shardy) for t, s in zip(tensors, hlo_shardings)]


def format_op_sharding(serialized: bytes) -> str:
    """An XLA OpSharding proto as HLO text writes it, e.g. "{devices=[2,1]0,1}"."""
    proto = xla_data_pb2.OpSharding.FromString(serialized)
    kind = xla_data_pb2.OpSharding
    if proto.type == kind.REPLICATED:
        return "{replicated}"
    if proto.type == kind.MAXIMAL:
        return f"{{maximal device={proto.tile_assignment_devices[0]}}}"
    if proto.type == kind.MANUAL:
        return "{manual}"
    if proto.type == kind.TUPLE:
        return "{" + ", ".join(format_op_sharding(t.SerializeToString())
                               for t in proto.tuple_shardings) + "}"
    dims = ",".join(map(str, proto.tile_assignment_dimensions))
    if proto.tile_assignment_devices:
        devices = ",".join(map(str, proto.tile_assignment_devices))
    else:
        devices = "<=[" + ",".join(map(str, proto.iota_reshape_dims)) + "]"
    suffix = " last_tile_dim_replicate" if proto.replicate_on_last_tile_dim else ""
    return f"{{devices=[{dims}]{devices}{suffix}}}"
