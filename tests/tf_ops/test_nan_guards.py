"""tf_ops.nan_guards: the ops whose outputs never hold -inf (pinned on TF's own kernels, so
that an upgrade changing one fails here), and the look-through that finds them."""
import numpy as np
import tensorflow as tf

from tf_ops import nan_guards

EDGES = [np.nan, -np.inf, np.inf, -0.0, 0.0, -1e-45, 1e-45, -3.0, 3.0, -6e4, 6e4]


def _raw(op_type):
    op = getattr(tf.raw_ops, op_type)
    return (lambda x: op(features=x)) if "features" in op.__doc__ else (lambda x: op(x=x))


def test_listed_ops_never_give_minus_inf_and_keep_nan():
    @tf.function(autograph=False)
    def outputs(x):
        return {op_type: (_raw(op_type)(x), nan_guards.never_negative_infinity(
            _raw(op_type)(x))) for op_type in sorted(nan_guards.NEVER_NEGATIVE_INFINITY)}

    for dtype in (np.float16, np.float32, np.float64):
        for op_type, (y, seen) in outputs(tf.constant(np.array(EDGES, dtype))).items():
            y = y.numpy()
            assert bool(seen), op_type
            assert not (y == -np.inf).any(), (op_type, dtype, y)
            assert np.isnan(y[0]) and not np.isnan(y[1:]).any(), (op_type, dtype, y)


def test_looks_through_moves_but_not_through_arithmetic():
    @tf.function(autograph=False)
    def kinds(x):
        r = tf.nn.relu(x)
        moved = tf.transpose(tf.reshape(tf.identity(r), [2, 3]))
        return [nan_guards.never_negative_infinity(t)
                for t in (r, moved, -r, r - 1.0, x, tf.nn.leaky_relu(x))]

    assert [bool(v) for v in kinds(tf.constant(np.arange(6.0, dtype=np.float32)))] == [
        True, True, False, False, False, False]
    # Eager tensors carry no producer: never claimed.
    assert not nan_guards.never_negative_infinity(tf.nn.relu(tf.constant([1.0])))


def test_relus_keep_nan_in_tf_and_strip_makes_them_tfs_relu_ops():
    # No subnormals: TF's kernels flush them (the contract's `flush_to_zero`), numpy does not.
    x = tf.constant(np.array([e for e in EDGES if abs(e) != 1e-45] + [7.0], np.float32))

    @tf.function(autograph=False)
    def layer(x):
        return nan_guards.relu(x) * 2.0, nan_guards.relu6(x)

    graph_def = layer.get_concrete_function(x).graph.as_graph_def()
    types = lambda gd: sorted(n.op for n in gd.node if n.op not in ("Const", "Placeholder",
                                                                    "Identity", "NoOp"))
    assert types(graph_def) == ["Maximum", "Maximum", "Minimum", "Mul"]
    stripped = nan_guards.strip(graph_def)
    assert types(stripped) == ["Mul", "Relu", "Relu", "Relu6"]  # one Relu: relu6's, unused
    outputs = [t.name for t in layer.get_concrete_function(x).outputs]
    inp = layer.get_concrete_function(x).inputs[0].name
    want = [np.maximum(x.numpy(), 0) * 2, np.clip(x.numpy(), 0, 6)]
    for gd in (graph_def, stripped):
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(gd, name="")
            got = tf.compat.v1.Session(graph=g).run(outputs, {inp: x.numpy()})
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)   # NaN kept by TF's Relu and Relu6 too
    # Function bodies: FunctionDef inputs name an output argument, `z` of Maximum/Minimum and
    # `activations` of Relu/Relu6.
    outer = tf.function(lambda x: layer(x), autograph=False)
    library = nan_guards.strip(outer.get_concrete_function(x).graph.as_graph_def()).library
    body = [f for f in library.function if any(relu_node(n) for n in f.node_def)]
    assert body
    for function in body:
        for node in function.node_def:
            for inp_name in node.input:
                if nan_guards.relu_op(inp_name.split(":")[0]):
                    assert inp_name.split(":")[1] == "activations", inp_name


def relu_node(node) -> bool:
    return node.op in ("Relu", "Relu6") and nan_guards.relu_op(node.name)
