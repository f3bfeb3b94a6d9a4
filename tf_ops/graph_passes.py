"""TF's own graph passes that have no public Python entry point: freezing a ConcreteFunction's
Variables into Consts, and Grappler. Imports no JAX.

Both are private TF (the modules named below), so they live here in `tf_ops`;
tests/tfjs/test_tfjs_export.py::test_private_freeze_entry_points_are_where_we_use_them fails
loudly if a TF upgrade moves them. The TF.js writer (saved_model_tools/tfjs/graph.py) is their
one user: it freezes a plain signature and runs the passes tensorflowjs's converter runs.
"""
from __future__ import annotations

import tensorflow as tf
# Private TF: Grappler (constant folding, arithmetic simplification, pruning) has no public
# Python entry point; tensorflowjs's converter runs the same passes before writing a model.
from tensorflow.core.protobuf import config_pb2
# Private TF: no public API freezes a ConcreteFunction's captured Variables into Consts.
# tensorflowjs's converter uses the same function (tf_saved_model_conversion_v2).
from tensorflow.python.framework import convert_to_constants
from tensorflow.python.grappler import cluster as gcluster
from tensorflow.python.grappler import tf_optimizer
from tensorflow.python.training.saver import export_meta_graph


def frozen_graph(concrete_function) -> tuple[tf.Graph, list, list]:
    """Returns (graph, input tensors, output tensors) of the frozen function.

    Variables become Consts and function calls are inlined; functional control flow (`While`,
    `If`) stays functional. Inputs are the function's non-captured placeholders, outputs its
    flat outputs, both as tensors of the frozen graph.
    """
    frozen = convert_to_constants.convert_variables_to_constants_v2(
        concrete_function, lower_control_flow=False, aggressive_inlining=True)
    return frozen.graph, list(frozen.inputs), list(frozen.outputs)


def grappler(graph_def, graph: tf.Graph, output_names: list[str], passes: list[str]):
    """`graph_def` after Grappler's `passes` (e.g. ["pruning", "constfold"]), keeping the
    nodes `output_names` depend on."""
    with graph.as_default():
        meta_graph = export_meta_graph(graph_def=graph_def, graph=graph)
    for name in output_names:
        meta_graph.collection_def["train_op"].node_list.value.append(name.split(":")[0])
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.optimizers[:] = passes
    cluster = gcluster.Cluster(disable_detailed_stats=True, disable_timeline=True)
    return tf_optimizer.OptimizeGraph(config, meta_graph, cluster=cluster)
