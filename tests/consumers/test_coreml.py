"""Core ML's converter (coremltools 9) on our plain graphs, with its defaults:
`ct.convert([concrete_function], source="tensorflow")` (an ML program, float16 compute), `None`
batch. Core ML runs models only on macOS, so this checks what can be checked on Linux: that the
conversion succeeds, and the ML program's op types against the same model written by hand in
Keras (benchmarks/handwritten_pairs.py) and converted the same way.

Op types: ours may use an op type the Keras model's program lacks only where EXTRA_OP_TYPES says
why. A lowering that grows a new op type into the Core ML program fails here.
"""
from __future__ import annotations

import collections
import functools
import logging

import pytest
import tensorflow as tf

from benchmarks import handwritten_pairs
from tests.consumers import models

ct = pytest.importorskip("coremltools", reason="coremltools is in the test extra "
                                               "(pip install -e '.[test]')")
logging.getLogger("coremltools").setLevel(logging.ERROR)
# Its warnings about the `None` batch (set to a flexible range, as the defaults do).
pytestmark = [pytest.mark.filterwarnings("ignore:Some dimensions in the input shape:UserWarning"),
              pytest.mark.filterwarnings('ignore:There is "None" dim:UserWarning')]

# Op types of our programs that the hand-written model's program lacks, and why.
EXTRA_OP_TYPES = {
    # Max pooling's NaN guard, maximum(pool, avg_pool(minimum(x, -inf))): TF's MaxPool drops a
    # NaN that JAX's max keeps. Softmax keeps JAX's division by the sum (reduce_sum).
    "cnn": {"minimum", "avg_pool", "maximum", "reduce_sum"},
    # Batch norm (inference) is JAX's scale and shift; Keras folds it into the convolution. A
    # ReLU is maximum(x, 0) in our TF graph (tf_ops.nan_guards.relu: TF's Grappler fuses a Relu
    # into oneDNN's convolution, which makes NaN 0); the CNN's allowance above covers it too.
    "resnet": {"mul", "maximum"},
    # JAX's GELU is the tanh form (jax.nn.gelu's default: tanh, mul, add), Keras's layer here
    # is fused by Core ML into one gelu; softmax as above; the masked softmax's minimum.
    "transformer": {"tanh", "reduce_sum", "minimum"},
    "mlp": set(),
}

# Framework models coremltools 9 does not convert yet, and why (a Keras model doing the same
# converts: conv, batch norm, pooling, attention are all ops Core ML converts). None today: the
# Linen transformer's causal mask stays its small tensor until an op broadcasts it
# (symbolic.broadcast_result), and its positional-embedding slice needs no BroadcastTo.
NOT_YET: dict[str, str] = {}


def _op_types(mlmodel) -> collections.Counter:
    counts = collections.Counter()
    for function in mlmodel._mil_program.functions.values():
        for op in function.operations:
            counts[op.op_type] += 1
    return counts


def _convert(function):
    return ct.convert([function.get_concrete_function()], source="tensorflow")


@functools.lru_cache(maxsize=None)
def _ours(name: str) -> collections.Counter:
    return _op_types(_convert(models.served(name).function))


def _handwritten(pair) -> collections.Counter | None:
    """The Keras model's op types, or None where coremltools refuses it."""
    keras_model = pair.keras_model(pair.params)
    function = tf.function(lambda x: keras_model(x), input_signature=[
        tf.TensorSpec((None, *pair.input_shape), tf.float32)])
    try:
        return _op_types(_convert(function))
    except NotImplementedError as e:  # e.g. the Keras MLP: "TF op 'Erfc' not implemented"
        print(f"coremltools refuses the hand-written {pair.name}: {str(e).splitlines()[0]}")
        return None


@pytest.mark.parametrize("name", sorted(handwritten_pairs.PAIRS))
def test_benchmark_model_converts_with_the_handwritten_op_types(name):
    ours = _ours(name)
    assert ours["const"] > 0 and sum(ours.values()) > ours["const"] + ours["cast"]
    handwritten = _handwritten(handwritten_pairs.PAIRS[name])
    if handwritten is None:
        return  # ours converts (above) where the hand-written model does not
    extra = set(ours) - set(handwritten)
    assert extra <= EXTRA_OP_TYPES[name], (sorted(extra - EXTRA_OP_TYPES[name]), dict(ours),
                                           dict(handwritten))


def _others() -> list:
    """Every model of models.py but the benchmark's four, NOT_YET's marked strict xfail."""
    params = []
    for param in models.by_name():
        if param.id in handwritten_pairs.PAIRS:
            continue
        if param.id in NOT_YET:
            param = pytest.param(*param.values, id=param.id, marks=pytest.mark.xfail(
                strict=True, raises=(NotImplementedError, ValueError), reason=NOT_YET[param.id]))
        params.append(param)
    return params


@pytest.mark.parametrize("model", _others())
def test_model_converts(model):
    ours = _ours(model.name)
    assert sum(ours.values()) > ours["const"] + ours["cast"], dict(ours)
