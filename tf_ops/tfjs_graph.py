"""A SavedModel signature as one frozen GraphDef for TF.js: Variables become Consts, function
calls are inlined, functional control flow (`While`, `If`) stays functional (TF.js runs
`While`/`StatelessWhile`/`If` with their library functions).

Imports no JAX. The freezing is TF's own `convert_variables_to_constants_v2`, the function
tensorflowjs's converter uses (tf_saved_model_conversion_v2._freeze_saved_model_v2): it is a
private TF entry point (tensorflow.python.framework.convert_to_constants), so it lives here in
`tf_ops` and tests/tfjs/test_tfjs_export.py::test_private_freeze_entry_point_is_where_we_use_it
fails loudly if a TF upgrade moves it.
"""
from __future__ import annotations

import tensorflow as tf
# Private TF: no public API freezes a ConcreteFunction's captured Variables into Consts.
from tensorflow.python.framework import convert_to_constants
# Private TF: Grappler (constant folding, arithmetic simplification, pruning) has no public
# Python entry point; tensorflowjs's converter runs the same passes before writing a model.
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.grappler import cluster as gcluster
from tensorflow.python.grappler import tf_optimizer
from tensorflow.python.training.saver import export_meta_graph

# Debug ops of our shape assertions (tf_ops/plain/control_flow.custom_call): TF.js has no Assert
# or StringFormat kernel. TF.js checks the fixed dimensions of each input against the
# signature; relations between symbolic dimensions go unchecked in TF.js (docs/tfjs.md).
_ASSERTION_OPS = frozenset({"Assert", "StringFormat", "PrintV2", "Print", "CheckNumerics"})


def frozen_graph(concrete_function) -> tuple[tf.Graph, list, list]:
    """Returns (graph, input tensors, output tensors) of the frozen function.

    Inputs are the function's non-captured placeholders, outputs its flat outputs, both as
    tensors of the frozen graph (their names are the graph-model's node names).
    """
    frozen = convert_to_constants.convert_variables_to_constants_v2(
        concrete_function, lower_control_flow=False, aggressive_inlining=True)
    return frozen.graph, list(frozen.inputs), list(frozen.outputs)


def strip_assertions(graph_def, output_names: list[str]):
    """Drops Assert/StringFormat nodes (and what only they use) and control edges to them.

    Keeps every node a graph output depends on through data edges or control edges to kept
    nodes; an assertion node is never kept.
    """
    nodes = {n.name: n for n in graph_def.node}
    keep: set[str] = set()
    stack = [name.split(":")[0] for name in output_names]
    while stack:
        name = stack.pop()
        if name in keep or name not in nodes or nodes[name].op in _ASSERTION_OPS:
            continue
        keep.add(name)
        for inp in nodes[name].input:
            stack.append(inp.lstrip("^").split(":")[0])
    result = tf.compat.v1.GraphDef()
    result.versions.CopyFrom(graph_def.versions)
    result.library.CopyFrom(graph_def.library)
    for node in graph_def.node:
        if node.name not in keep:
            continue
        copy = result.node.add()
        copy.CopyFrom(node)
        kept_inputs = [i for i in node.input
                       if not i.startswith("^") or i[1:].split(":")[0] in keep]
        del copy.input[:]
        copy.input.extend(kept_inputs)
    return result


def erfc_as_erf(graph_def):
    """A copy of `graph_def` with each `Erfc(x)` written as `1 - Erf(x)`: TF.js has no Erfc
    kernel (a plain graph's exact GELU, like Keras's, holds one). TF.js's Erf is itself an
    approximation (within 1.5e-7 of erf), so there `erfc(x)` is within about 2e-7 absolute;
    past x = 4, where erfc < 2e-8, TF.js gives 0. The node keeps its name: its users do not
    change."""
    result = type(graph_def)()
    result.CopyFrom(graph_def)
    for node in list(result.node):
        if node.op != "Erfc":
            continue
        dtype = node.attr["T"]
        erf = result.node.add(name=node.name + "/erf", op="Erf", input=[node.input[0]])
        erf.attr["T"].CopyFrom(dtype)
        one = result.node.add(name=node.name + "/one", op="Const")
        one.attr["dtype"].type = dtype.type
        one.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(
            1.0, dtype=tf.as_dtype(dtype.type)))
        node.op = "Sub"
        del node.input[:]
        node.input.extend([one.name, erf.name])
    return result


def simplify(graph_def, graph, output_names: list[str]):
    """Grappler's pruning, constant folding and arithmetic passes (twice), as tensorflowjs does.

    Folds the shape arithmetic of fixed dimensions into constants: fewer ops for TF.js to run,
    and the graph TF.js sees is the one tensorflowjs's own converter would give it.
    """
    with graph.as_default():
        meta_graph = export_meta_graph(graph_def=graph_def, graph=graph)
    for name in output_names:
        meta_graph.collection_def["train_op"].node_list.value.append(name.split(":")[0])
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.optimizers[:] = [
        "pruning", "constfold", "arithmetic", "dependency",
        "pruning", "constfold", "arithmetic", "dependency"]
    cluster = gcluster.Cluster(disable_detailed_stats=True, disable_timeline=True)
    return tf_optimizer.OptimizeGraph(config, meta_graph, cluster=cluster)


def library_op_types(graph_def) -> set[str]:
    """Op types of the graph and of every function in its library."""
    ops = {n.op for n in graph_def.node}
    for function in graph_def.library.function:
        ops.update(n.op for n in function.node_def)
    return ops
