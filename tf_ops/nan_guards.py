"""NaN guards: the few ops a plain graph adds where a TF kernel does not give JAX's NaN (or
infinity) results, and their removal for runtimes that bring their own kernels.

A TF engineer's softmax or max pooling is one op, and that op drops NaN where JAX propagates
it: TF's Softmax (oneDNN's on x86) leaves NaN only where its own `x - max` is NaN, TF's
MaxPool skips NaN. The plain lowering keeps JAX's values in TF by combining the kernel's result
`y` with a second value in one last op named `restore` under the name scope `jax_nan_guard`
(`guarded`); that op's first input is always `y`.

A ReLU is TF's `Relu` in a TF engineer's graph, and TF's `Relu` keeps NaN; but Grappler's
remapper fuses a `Relu` after a convolution or a matrix product and its bias into oneDNN's
`_FusedConv2D`/`_FusedMatMul`, whose ReLU makes NaN 0 (measured with TF 2.21: a NaN input to
`relu(conv(x) + b)` with a polymorphic batch gave 0 in the `tf.function`, NaN under `jax.jit`).
So plain graphs write a ReLU as `Maximum(x, 0)`, which the remapper leaves alone and which keeps
NaN (`relu`, `relu6`: named `relu`/`relu6` under the guard scope).

TFLite's and TF.js's interpreters run their own kernels, whose NaN handling is theirs (as for
a hand-written model), so their writers take the graph without the guards (`strip`): every use
of a `restore` op reads its first input instead, and the guard's other ops are left unused;
the ReLUs become TF's `Relu` and `Relu6` again, which those converters fuse into the layer
before them.
"""
from __future__ import annotations

import re
from typing import Callable

import tensorflow as tf

NAN_GUARD_SCOPE = "jax_nan_guard"
_RESTORE = re.compile(r"(^|/)" + NAN_GUARD_SCOPE + r"(_\d+)?/restore$")
# The ReLUs written as Maximum/Minimum (`relu`, `relu6`), by the name of their last op.
_RELU = re.compile(r"(^|/)" + NAN_GUARD_SCOPE + r"(_\d+)?/(relu6?)$")


def guarded(y: tf.Tensor, combine: Callable, guard: Callable[[], tf.Tensor]) -> tf.Tensor:
    """`combine(y, guard())` (e.g. tf.minimum), built under the guard scope with the combining
    op named `restore` so that `strip` can find it.

    Example:
        >>> y = tf.constant([1.0, 2.0])
        >>> guarded(y, tf.minimum, lambda: tf.reduce_sum(y)).numpy()
        array([1., 2.], dtype=float32)
    """
    with tf.name_scope(NAN_GUARD_SCOPE):
        return combine(y, guard(), name="restore")


def relu(x: tf.Tensor) -> tf.Tensor:
    """`max(x, 0)` as `Maximum(x, 0)`: TF's `Relu` where Grappler cannot fuse it into a
    oneDNN kernel that makes NaN 0 (`strip` turns it back into `Relu`).

    Example:
        >>> relu(tf.constant([-1.0, 2.0, float("nan")])).numpy()
        array([ 0.,  2., nan], dtype=float32)
    """
    with tf.name_scope(NAN_GUARD_SCOPE):
        return tf.maximum(x, tf.zeros([], x.dtype), name="relu")


def relu6(x: tf.Tensor) -> tf.Tensor:
    """`min(max(x, 0), 6)` as `Minimum(relu(x), 6)` (`strip` turns it into `Relu6`).

    Example:
        >>> relu6(tf.constant([-1.0, 8.0, float("nan")])).numpy()
        array([ 0.,  6., nan], dtype=float32)
    """
    lower = relu(x)
    with tf.name_scope(NAN_GUARD_SCOPE):
        return tf.minimum(lower, tf.constant(6, x.dtype), name="relu6")


# TF ops whose outputs never hold -inf, whatever their inputs (NaN stays NaN): pinned on TF's
# kernels with edge values by tests/tf_ops/test_nan_guards.py. A max pool's guard over such a
# tensor skips a pass over it (`never_negative_infinity`).
NEVER_NEGATIVE_INFINITY = frozenset({
    "Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh", "Exp", "Abs", "Softplus"})
# Ops that move values without changing any: what they read holds what they give.
_VALUE_PRESERVING = frozenset({"Identity", "Reshape", "Transpose"})


def never_negative_infinity(t: tf.Tensor) -> bool:
    """Whether `t` is, in the graph being built, an output of an op of
    `NEVER_NEGATIVE_INFINITY` (through reshapes and transposes). False for eager tensors.

    Example:
        >>> @tf.function
        ... def f(x):
        ...     return never_negative_infinity(tf.nn.relu(x)), never_negative_infinity(-x)
        >>> [bool(v) for v in f(tf.constant([1.0]))]
        [True, False]
    """
    while hasattr(t, "op") and not tf.executing_eagerly():
        try:
            op_type = t.op.type
        except AttributeError:  # an EagerTensor's .op raises
            return False
        if op_type in NEVER_NEGATIVE_INFINITY or (
                op_type in ("Maximum", "Minimum") and relu_op(t.op.name)):
            return True
        if op_type not in _VALUE_PRESERVING:
            return False
        t = t.op.inputs[0]
    return False


def restore_op(name: str) -> bool:
    """Whether a node of that (possibly function-prefixed) name combines a guard."""
    return bool(_RESTORE.search(name))


def relu_op(name: str) -> bool:
    """Whether a node of that (possibly function-prefixed) name is the last op of `relu` or
    `relu6`."""
    return bool(_RELU.search(name))


def strip(graph_def):
    """A copy of `graph_def` (a GraphDef; its function library too) in which every use of a
    guard's `restore` op reads the guarded value instead, and the ReLUs of `relu` and `relu6`
    are TF's `Relu` and `Relu6`."""
    result = type(graph_def)()
    result.CopyFrom(graph_def)
    _rewire_graph(result.node)
    _relus_as_tf_ops(result.node)
    for function in result.library.function:
        _rewire_function(function)
        renamed = _relus_as_tf_ops(function.node_def)
        _rename_outputs(function, renamed)
    return result


def _relus_as_tf_ops(nodes) -> set[str]:
    """`Maximum(x, 0)` named `relu` -> `Relu(x)`; `Minimum(relu, 6)` named `relu6` ->
    `Relu6(x)` (its `relu` is left unused). Returns the names of the nodes changed."""
    by_name = {n.name: n for n in nodes}
    changed = set()
    for node in nodes:
        match = _RELU.search(node.name)
        if not match or node.op not in ("Maximum", "Minimum"):
            continue
        x = _data_inputs(node)[0]
        if match.group(3) == "relu6":
            inner = by_name.get(x.split(":")[0])
            if inner is None or not relu_op(inner.name) or inner.op not in ("Maximum", "Relu"):
                continue
            x = _data_inputs(inner)[0]
        control = [i for i in node.input if i.startswith("^")]
        node.op = "Relu6" if match.group(3) == "relu6" else "Relu"
        del node.input[:]
        node.input.extend([x] + control)
        changed.add(node.name)
    return changed


def _data_inputs(node) -> list[str]:
    return [i for i in node.input if not i.startswith("^")]


def _rename_outputs(function, renamed: set[str]) -> None:
    """FunctionDef inputs name an op's output argument: `Maximum`'s and `Minimum`'s is `z`,
    `Relu`'s and `Relu6`'s `activations`."""
    def fixed(inp: str) -> str:
        parts = inp.split(":")
        if len(parts) == 3 and parts[0].lstrip("^") in renamed and parts[1] == "z":
            parts[1] = "activations"
        return ":".join(parts)

    for node in function.node_def:
        node.input[:] = [fixed(i) for i in node.input]
    for key, value in list(function.ret.items()):
        function.ret[key] = fixed(value)


def _rewire_graph(nodes) -> None:
    """GraphDef inputs: "name", "name:1", "^name"."""
    restores = {n.name: n.input[0] for n in nodes if restore_op(n.name)}
    if not restores:
        return
    for node in nodes:
        for i, inp in enumerate(node.input):
            control = inp.startswith("^")
            name, _, port = inp.lstrip("^").partition(":")
            if name in restores and not control and port in ("", "0"):
                node.input[i] = _resolve(restores, name)


def _rewire_function(function) -> None:
    """FunctionDef inputs: "node:output_arg:index" (or an argument name)."""
    restores = {n.name: n.input[0] for n in function.node_def if restore_op(n.name)}
    if not restores:
        return
    for node in function.node_def:
        for i, inp in enumerate(node.input):
            name = inp.split(":")[0]
            if name in restores and not inp.startswith("^"):
                node.input[i] = _resolve(restores, name)
    for key, value in list(function.ret.items()):
        if value.split(":")[0] in restores:
            function.ret[key] = _resolve(restores, value.split(":")[0])


def _resolve(restores: dict, name: str) -> str:
    """The guarded value of a `restore` op (through guards of guards)."""
    value = restores[name]
    seen = {name}
    while value.split(":")[0] in restores and value.split(":")[0] not in seen:
        seen.add(value.split(":")[0])
        value = restores[value.split(":")[0]]
    return value
