"""tf_ops.shardings: the private TF sharding builder we use, pinned; the protos it writes."""
import jax
import numpy as np
import tensorflow as tf

from tf_ops import shardings


def test_private_tf_sharding_modules_are_where_we_expect():
    # If this fails, TF moved xla_sharding / xla_data_pb2: update tf_ops/shardings.py imports.
    from tensorflow.compiler.xla import xla_data_pb2
    from tensorflow.python.compiler.xla.experimental import xla_sharding
    assert hasattr(xla_sharding.Sharding, "apply_to_tensor")
    import inspect
    assert "sharding_v2_proto" in inspect.signature(xla_sharding.Sharding.apply_to_tensor).parameters
    assert "iota_reshape_dims" in xla_data_pb2.OpSharding.DESCRIPTOR.fields_by_name


def _hlo_sharding(spec, shape):
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    named = jax.sharding.NamedSharding(mesh, spec)
    from jax2tf_native import _jax_internals
    return _jax_internals.named_sharding_to_hlo(named, len(shape))


def test_shard_builds_an_xla_sharding_op_with_the_proto_in_graphs_only():
    hlo = _hlo_sharding(jax.sharding.PartitionSpec(), (2, 3))

    @tf.function(autograph=False)
    def f(x):
        return shardings.shard(x, hlo, shardy=True)

    graph = f.get_concrete_function(tf.TensorSpec([2, 3], tf.float32)).graph
    ops = [op for op in graph.get_operations() if op.type == "XlaSharding"]
    assert len(ops) == 1
    from tensorflow.compiler.xla import xla_data_pb2
    proto = xla_data_pb2.OpSharding.FromString(ops[0].get_attr("sharding"))
    assert proto.type == hlo.to_proto().type
    np.testing.assert_array_equal(f(np.ones((2, 3), np.float32)).numpy(), np.ones((2, 3)))
    x = tf.ones(3)
    assert shardings.shard(x, None, shardy=True) is x


def test_names_shared_with_the_jax_free_readers_agree():
    # tf_ops.host_can_run cannot import JAX; its copy of the platform check's name must match.
    from tf_ops import host_can_run
    assert host_can_run.PLATFORM_CHECK == str(jax.export.DisabledSafetyCheck.platform())
    # Private TF used to record them on the op (tf_ops.xla_call_module._call_module).
    assert callable(getattr(tf.Operation, "_set_attr", None))


def test_format_op_sharding_reads_what_tf_ops_writes():
    from saved_model_tools import inspect as inspect_lib
    hlo = _hlo_sharding(jax.sharding.PartitionSpec(), (2, 3))
    v1, _ = shardings._tf_op_shardings(hlo, shardy=False)
    assert shardings.format_op_sharding(v1.SerializeToString()) == str(hlo) == "{replicated}"
    from tensorflow.compiler.xla import xla_data_pb2
    tiled = xla_data_pb2.OpSharding(type=xla_data_pb2.OpSharding.OTHER,
                                    tile_assignment_dimensions=[2, 1],
                                    tile_assignment_devices=[1, 0])
    assert shardings.format_op_sharding(tiled.SerializeToString()) == "{devices=[2,1]1,0}"
