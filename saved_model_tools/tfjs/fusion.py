"""The folds and fusions tensorflowjs's converter makes of a hand-written model, made of a
frozen plain graph (a GraphDef; imports no JAX).

tensorflowjs 4.22 (tf_saved_model_conversion_v2.optimize_graph) runs Grappler, folds batch-norm
ops into the convolution before them, turns an `AddV2` after a `Conv2D`/`MatMul` into a
`BiasAdd`, then runs Grappler's remapper, which fuses `Conv2D`/`MatMul` + `BiasAdd` + an
activation into one `_FusedConv2D`/`_FusedMatMul`. A JAX model arrives without batch-norm ops:
its inference batch norm is `(conv - mean) * scale + bias` in plain arithmetic. So:

- `fold_channel_affine`: a chain of `Add`/`Sub`/`Mul`/`BiasAdd` by per-channel constants after a
  `Conv2D`, `DepthwiseConv2dNative` or `MatMul` with constant weights becomes the contraction
  with scaled weights plus one `BiasAdd` (`x*s + b` with `s` folded into the weights), what
  tensorflowjs's batch-norm folding makes of Keras's batch norm. Rounding differs from the
  unfolded arithmetic by a few float32 ulps (the folded constants are computed in float64 and
  rounded once).
- `fuse_bias_activation`: `Conv2D`/`MatMul` + `BiasAdd` (+ `Relu`, `Relu6`, `Elu` or
  `LeakyRelu`) becomes `_FusedConv2D`/`_FusedMatMul`. Our own pass, not Grappler's remapper:
  the remapper also fuses what TF.js cannot run (JAX's exact GELU becomes a `_FusedMatMul` with
  `GeluExact`; with oneDNN, `BiasAdd` + `Add` + `Relu` and layer-norm fusions), and what it
  fuses depends on the process's oneDNN setting. The activations kept are those both TF's CPU
  kernels and TF.js 4.22's CPU, WebGL and WASM backends run (TF.js: linear, relu, relu6, elu,
  leakyrelu, prelu, sigmoid; TF's `_FusedConv2D` has no sigmoid).

Both passes work on the graph's own nodes (not its function library: a loop body is left as it
is), keep the name of the last node they replace (its users and the graph's outputs do not
change) and leave a node alone when anything else reads the values they remove.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

_CONTRACTIONS = frozenset({"Conv2D", "DepthwiseConv2dNative", "MatMul"})
_ADDS = frozenset({"Add", "AddV2", "BiasAdd"})
# Activation op -> the name in `fused_ops` (TF's remapper's spelling; TF.js lowercases it).
FUSABLE_ACTIVATIONS = {"Relu": "Relu", "Relu6": "Relu6", "Elu": "Elu", "LeakyRelu": "LeakyRelu"}
_CONV_ATTRS = ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations",
               "use_cudnn_on_gpu")
# TF's defaults for the fused ops' attributes the fusion does not use.
_FUSED_EPSILON, _LEAKYRELU_ALPHA = 0.0001, 0.2


class _Graph:
    """The nodes of a GraphDef by name, with who reads each node's values."""

    def __init__(self, graph_def, output_names):
        self.graph_def = graph_def
        self.nodes = {n.name: n for n in graph_def.node}
        self.readers: dict[str, list] = {}
        self.control_readers: set[str] = set()
        for node in graph_def.node:
            for inp in node.input:
                if inp.startswith("^"):
                    self.control_readers.add(inp[1:])
                else:
                    self.readers.setdefault(inp.split(":")[0], []).append(node)
        self.outputs = {name.split(":")[0] for name in output_names}

    def only_reader(self, name: str):
        """The one node that reads `name`'s values, or None (several, none, a control edge,
        or a graph output)."""
        readers = self.readers.get(name, [])
        if len(readers) != 1 or name in self.control_readers or name in self.outputs:
            return None
        return readers[0]

    def constant(self, name: str) -> np.ndarray | None:
        node = self.nodes.get(name.split(":")[0])
        if node is None or node.op != "Const":
            return None
        return tf.make_ndarray(node.attr["value"].tensor)

    def add_constant(self, name: str, value: np.ndarray) -> str:
        while name in self.nodes:
            name += "_"
        node = self.graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = tf.float32.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value.astype(np.float32)))
        self.nodes[name] = node
        return name

    def remove(self, names: set[str]):
        kept = [n for n in self.graph_def.node if n.name not in names]
        del self.graph_def.node[:]
        self.graph_def.node.extend(kept)


def fold_channel_affine(graph_def, output_names: list[str]):
    """A copy of `graph_def` in which `contraction -> (Add|Sub|Mul|BiasAdd by a per-channel
    constant)*` becomes `contraction with scaled weights -> BiasAdd`.

    A per-channel constant is a float32 scalar or a tensor whose dimensions are all 1 but the
    last, which is 1 or the number of output channels (TF's broadcasting against NHWC or
    `[batch, features]`). Each op of the chain must be the only reader of the one before, and
    the folded constants must be finite.

    Example:
        >>> g = tf.Graph()
        >>> with g.as_default():
        ...     x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        ...     y = tf.identity((tf.matmul(x, [[1.0, 2.0], [3.0, 4.0]]) - 1.0) * [2.0, 3.0],
        ...                     name="y")
        >>> folded = fold_channel_affine(g.as_graph_def(), ["y"])
        >>> sorted(n.op for n in folded.node if n.op != "Const")
        ['BiasAdd', 'Identity', 'MatMul', 'Placeholder']
    """
    result = type(graph_def)()
    result.CopyFrom(graph_def)
    graph = _Graph(result, output_names)
    removed: set[str] = set()
    for node in list(result.node):
        if node.op not in _CONTRACTIONS or node.attr["T"].type != tf.float32.as_datatype_enum:
            continue
        weights = graph.constant(node.input[1])
        channels = _output_channels(node, weights)
        if channels is None:
            continue
        scale, bias = np.ones(channels), np.zeros(channels)
        chain, current = [], node
        while (reader := graph.only_reader(current.name)) is not None:
            step = _affine_step(graph, reader, current.name, channels,
                                rank=2 if node.op == "MatMul" else 4)
            if step is None:
                break
            with np.errstate(all="ignore"):   # a non-finite result is refused below
                scale, bias = step[0] * scale, step[0] * bias + step[1]
            chain.append(reader)
            current = reader
        if not chain or (len(chain) == 1 and chain[0].op == "BiasAdd"):
            continue
        with np.errstate(all="ignore"):
            scaled = _scaled_weights(node, weights, scale)
        if not (np.all(np.isfinite(scaled)) and np.all(np.isfinite(bias))):
            continue
        if np.any(scale != 1):
            node.input[1] = graph.add_constant(node.name + "/folded_weights", scaled)
        last, name = chain[-1], chain[-1].name
        bias_name = graph.add_constant(node.name + "/folded_bias", bias)
        last.Clear()
        last.name, last.op = name, "BiasAdd"
        last.input.extend([node.name, bias_name])
        last.attr["T"].CopyFrom(node.attr["T"])
        last.attr["data_format"].s = b"NHWC"
        removed.update(n.name for n in chain[:-1])
    graph.remove(removed)
    return result


def _output_channels(node, weights) -> int | None:
    """Output channels of a contraction with constant weights, where they are the output's
    last dimension (NHWC convolutions, un-transposed results); None otherwise."""
    if weights is None:
        return None
    if node.op == "MatMul":
        return weights.shape[0] if node.attr["transpose_b"].b else weights.shape[1]
    if node.attr["data_format"].s not in (b"", b"NHWC") or weights.ndim != 4:
        return None
    return weights.shape[3] if node.op == "Conv2D" else weights.shape[2] * weights.shape[3]


def _affine_step(graph: _Graph, node, value_name: str, channels: int, rank: int):
    """(s, b) with node(value) == value * s + b per channel, or None when `node` is not an
    Add/Sub/Mul/BiasAdd of `value_name` by a per-channel constant."""
    if node.op not in _ADDS | {"Sub", "Mul"} or len(node.input) != 2:
        return None
    names = [_first_output(i) for i in node.input]
    if names.count(value_name) != 1 or (node.op == "BiasAdd" and names[0] != value_name):
        return None
    constant = graph.constant(node.input[1 - names.index(value_name)])
    if constant is None or constant.dtype != np.float32 or not _per_channel(
            constant, channels, rank, bias_add=node.op == "BiasAdd"):
        return None
    c = np.broadcast_to(constant.reshape(-1) if constant.ndim else constant,
                        (channels,)).astype(np.float64)
    if node.op == "Mul":
        return c, np.zeros(channels)
    if node.op == "Sub":
        return (np.ones(channels), -c) if names[0] == value_name else (-np.ones(channels), c)
    return np.ones(channels), c


def _first_output(name: str) -> str | None:
    """The node name of a data input that reads a node's first output ("n" or "n:0")."""
    node, _, port = name.partition(":")
    return node if port in ("", "0") and not name.startswith("^") else None


def _per_channel(constant: np.ndarray, channels: int, rank: int, bias_add: bool) -> bool:
    """Whether `constant` broadcasts against a rank-`rank` value only along its last dimension
    (of size `channels`), leaving the value's shape as it is."""
    if bias_add:
        return constant.shape == (channels,)
    return constant.ndim <= rank and all(d == 1 for d in constant.shape[:-1]) and (
        constant.ndim == 0 or constant.shape[-1] in (1, channels))


def _scaled_weights(node, weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The weights times `scale` along the output channels (float64, rounded once)."""
    w = weights.astype(np.float64)
    if node.op == "MatMul":
        w = w * (scale[:, None] if node.attr["transpose_b"].b else scale)
    elif node.op == "Conv2D":
        w = w * scale
    else:   # DepthwiseConv2dNative [h, w, in, multiplier]: output channel in * m + k
        w = w * scale.reshape(w.shape[2], w.shape[3])
    return w.astype(np.float32)


def fuse_bias_activation(graph_def, output_names: list[str]):
    """A copy of `graph_def` in which `Conv2D`/`MatMul -> BiasAdd (-> activation)` is one
    `_FusedConv2D`/`_FusedMatMul` (activations: `FUSABLE_ACTIVATIONS`).

    Example:
        >>> g = tf.Graph()
        >>> with g.as_default():
        ...     x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        ...     y = tf.identity(tf.nn.relu(tf.nn.bias_add(tf.matmul(x, [[1.0], [2.0]]), [0.5])),
        ...                     name="y")
        >>> fused = fuse_bias_activation(g.as_graph_def(), ["y"])
        >>> [(n.op, list(n.attr["fused_ops"].list.s)) for n in fused.node if n.op == "_FusedMatMul"]
        [('_FusedMatMul', [b'BiasAdd', b'Relu'])]
    """
    result = type(graph_def)()
    result.CopyFrom(graph_def)
    graph = _Graph(result, output_names)
    removed: set[str] = set()
    for node in list(result.node):
        if node.op not in ("Conv2D", "MatMul") or node.attr["T"].type != \
                tf.float32.as_datatype_enum:
            continue
        if node.op == "Conv2D" and node.attr["data_format"].s not in (b"", b"NHWC"):
            continue
        bias_add = graph.only_reader(node.name)
        if bias_add is None or bias_add.op != "BiasAdd" or bias_add.input[0] != node.name \
                or bias_add.attr["data_format"].s not in (b"", b"NHWC"):
            continue
        fused_ops, last = [b"BiasAdd"], bias_add
        activation = graph.only_reader(bias_add.name)
        if activation is not None and activation.op in FUSABLE_ACTIVATIONS:
            fused_ops.append(FUSABLE_ACTIVATIONS[activation.op].encode())
            last = activation
        alpha = last.attr["alpha"].f if last.op == "LeakyRelu" else _LEAKYRELU_ALPHA
        fused = tf.compat.v1.NodeDef(
            name=last.name, op="_Fused" + node.op,
            input=[node.input[0], node.input[1], bias_add.input[1]], device=node.device)
        for key in (_CONV_ATTRS if node.op == "Conv2D" else ("T", "transpose_a", "transpose_b")):
            if key in node.attr:
                fused.attr[key].CopyFrom(node.attr[key])
        if node.op == "Conv2D":
            fused.attr["TArgs"].list.type.append(node.attr["T"].type)
            fused.attr["num_host_args"].i = 0
        fused.attr["num_args"].i = 1
        fused.attr["fused_ops"].list.s.extend(fused_ops)
        fused.attr["epsilon"].f = _FUSED_EPSILON
        fused.attr["leakyrelu_alpha"].f = alpha
        last.CopyFrom(fused)
        removed.update({node.name, bias_add.name} - {last.name})
    graph.remove(removed)
    return result
