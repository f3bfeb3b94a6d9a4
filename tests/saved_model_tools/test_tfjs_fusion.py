"""saved_model_tools.tfjs.fusion on small graphs run by TF itself: the folded and fused graph
computes what the graph it came from computes (the fold within a few float32 ulps), and what is not a
per-channel affine chain or a fusable activation is left as it was."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

from saved_model_tools.tfjs import fusion

RNG = np.random.default_rng(0)
CHANNELS = 6


def _const(*shape, low=0.5, high=1.5):
    return tf.constant(_values(*shape, low=low, high=high))


def _values(*shape, low=0.5, high=1.5):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _graph(build, x_shape):
    """(GraphDef, input name, output names) of `build(x)`, the result named "y"."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, x_shape, name="x")
        tf.identity(build(x), name="y")
    return graph.as_graph_def(), ["y:0"]


def _run(graph_def, x):
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run("y:0", {"x:0": x})


def _ops(graph_def):
    return collections.Counter(n.op for n in graph_def.node
                               if n.op not in ("Const", "Placeholder", "Identity"))


def _conv(x):
    return tf.nn.conv2d(x, _const(3, 3, 4, CHANNELS, low=-1, high=1), 1, "SAME")


def _depthwise(x):   # 4 inputs, multiplier 2 (it is also tf.nn.depthwise_conv2d's layout)
    return tf.nn.depthwise_conv2d(x, _const(3, 3, 4, 2, low=-1, high=1), [1, 1, 1, 1], "SAME")


def _matmul_transposed(x):
    return tf.matmul(tf.reshape(x, [-1, 4]), _const(CHANNELS, 4, low=-1, high=1),
                     transpose_b=True)


def _batch_norm(y, channels=CHANNELS):
    """JAX's inference batch norm: (y - mean) * scale + bias, per channel."""
    scale = _values(channels).reshape([1] * (y.shape.rank - 1) + [channels])
    return (y - _const(channels)) * tf.constant(scale) + _const(channels)


CHAINS = {
    "conv batch norm relu": (lambda x: tf.nn.relu(_batch_norm(_conv(x))), [2, 5, 5, 4],
                             {"Conv2D": 1, "BiasAdd": 1, "Relu": 1}),
    "depthwise batch norm": (lambda x: _batch_norm(_depthwise(x), 8), [2, 5, 5, 4],
                             {"DepthwiseConv2dNative": 1, "BiasAdd": 1}),
    "matmul, constant minus it, times a scalar": (
        lambda x: (_const(CHANNELS) - _matmul_transposed(x)) * 3.0, [5, 4],
        {"MatMul": 1, "BiasAdd": 1, "Reshape": 1}),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_affine_chain_folds_into_weights_and_one_bias_add(name):
    build, x_shape, want_ops = CHAINS[name]
    graph_def, outputs = _graph(build, x_shape)
    folded = fusion.fold_channel_affine(graph_def, outputs)
    assert _ops(folded) == want_ops
    x = RNG.standard_normal(x_shape).astype(np.float32)
    want, got = _run(graph_def, x), _run(folded, x)
    # A few float32 ulps of the largest intermediate (the fold rounds differently).
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.spacing(np.abs(want).max()))


def _conv_read_twice(x):
    y = _conv(x)
    return tf.stack([y, y * 2.0])


NOT_FOLDED = {
    # The convolution's values are read by the Mul and by the Pack.
    "second reader": (_conv_read_twice, [1, 5, 5, 4]),
    # Per position, not per channel.
    "spatial constant": (lambda x: _conv(x) * _const(1, 5, 5, CHANNELS), [1, 5, 5, 4]),
    # Not a constant.
    "variable operand": (lambda x: _conv(x) * tf.reduce_mean(x), [1, 5, 5, 4]),
    # Folding infinity into the weights would turn 0 * inf into NaN.
    "infinite scale": (lambda x: _conv(x) * np.float32(np.inf), [1, 5, 5, 4]),
}


@pytest.mark.parametrize("name", sorted(NOT_FOLDED))
def test_what_is_not_a_per_channel_affine_chain_is_left_alone(name):
    build, x_shape = NOT_FOLDED[name]
    graph_def, outputs = _graph(build, x_shape)
    folded = fusion.fold_channel_affine(graph_def, outputs)
    assert _ops(folded) == _ops(graph_def)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    np.testing.assert_array_equal(_run(folded, x), _run(graph_def, x))


ACTIVATIONS = {"Relu": tf.nn.relu, "Relu6": tf.nn.relu6, "Elu": tf.nn.elu,
               "LeakyRelu": lambda t: tf.nn.leaky_relu(t, alpha=0.3),
               "Sigmoid": tf.sigmoid, "Tanh": tf.tanh}


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("contraction", ["Conv2D", "MatMul"])
def test_bias_add_and_activation_fuse_into_the_contraction(contraction, activation):
    if contraction == "Conv2D":
        build, x_shape = _conv, [2, 5, 5, 4]
    else:
        build, x_shape = (lambda x: tf.matmul(x, _const(4, CHANNELS, low=-1, high=1))), [3, 4]
    bias = _values(CHANNELS, low=-1, high=1)
    graph_def, outputs = _graph(
        lambda x: ACTIVATIONS[activation](tf.nn.bias_add(build(x), bias)), x_shape)
    fused = fusion.fuse_bias_activation(graph_def, outputs)
    (node,) = [n for n in fused.node if n.op == "_Fused" + contraction]
    fusable = activation in fusion.FUSABLE_ACTIVATIONS
    assert list(node.attr["fused_ops"].list.s) == \
        [b"BiasAdd"] + ([activation.encode()] if fusable else [])
    assert _ops(fused) == collections.Counter(
        {"_Fused" + contraction: 1, **({} if fusable else {activation: 1})})
    if activation == "LeakyRelu":
        assert node.attr["leakyrelu_alpha"].f == pytest.approx(0.3)
    x = RNG.standard_normal(x_shape).astype(np.float32) * 4
    want = _run(graph_def, x)
    np.testing.assert_allclose(_run(fused, x), want, rtol=1e-6,
                               atol=4 * np.spacing(np.abs(want).max()))
