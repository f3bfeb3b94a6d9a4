"""The graph rewrites a plain SavedModel signature needs before TF.js runs it, after TF freezes
it (`tf_ops.graph_passes.frozen_graph`): assertion ops dropped, `Erfc` as `1 - Erf`, and
Grappler's simplifications with the folds and fusions tensorflowjs's converter makes. Imports
no JAX; the private TF passes themselves are in `tf_ops.graph_passes`.
"""
from __future__ import annotations

import tensorflow as tf

from saved_model_tools.tfjs import fusion
from tf_ops.graph_passes import grappler

# Debug ops of our shape assertions (tf_ops/plain/control_flow.custom_call): TF.js has no Assert
# or StringFormat kernel. TF.js checks the fixed dimensions of each input against the
# signature; relations between symbolic dimensions go unchecked in TF.js (docs/tfjs.md).
_ASSERTION_OPS = frozenset({"Assert", "StringFormat", "PrintV2", "Print", "CheckNumerics"})
# Constants first (the parameters' arithmetic becomes Consts the affine fold reads), then the
# passes tensorflowjs runs before its own folds.
_CONSTANT_PASSES = ["pruning", "constfold", "dependency"]
_SIMPLIFY_PASSES = ["pruning", "constfold", "arithmetic", "dependency"] * 2


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


def optimize(graph_def, graph, output_names: list[str]):
    """Grappler's simplification and the folds and fusions tensorflowjs's converter makes.

    Grappler's pruning, constant folding and arithmetic passes (twice, as tensorflowjs runs
    them) fold the shape arithmetic of fixed dimensions and the parameters' arithmetic into
    constants; per-channel affine ops after a convolution or matmul are folded into its weights
    and a `BiasAdd`, and `Conv2D`/`MatMul` + `BiasAdd` + activation become `_FusedConv2D`/
    `_FusedMatMul` (`fusion`). The affine fold runs between a constant-folding pass and the
    arithmetic passes: a `BiasAdd` before a `Relu` keeps Grappler from moving the `Relu` after a following `MaxPool` (its arithmetic pass leaves a `Relu` the remapper could
    fuse in place), so the `Relu` fuses into the convolution as in the hand-written model.
    """
    graph_def = grappler(graph_def, graph, output_names, _CONSTANT_PASSES)
    graph_def = fusion.fold_channel_affine(graph_def, output_names)
    graph_def = grappler(graph_def, graph, output_names, _SIMPLIFY_PASSES)
    return fusion.fuse_bias_activation(graph_def, output_names)


def library_op_types(graph_def) -> set[str]:
    """Op types of the graph and of every function in its library."""
    ops = {n.op for n in graph_def.node}
    for function in graph_def.library.function:
        ops.update(n.op for n in function.node_def)
    return ops
