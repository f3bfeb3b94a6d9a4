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
