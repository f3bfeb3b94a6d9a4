"""Pins the private TF tape-stack entry points `tf_ops.tape_state` uses: a TF upgrade that moves
or changes them fails here, by name, not as slow or wrong gradients elsewhere."""
import numpy as np
import tensorflow as tf

from tf_ops import tape_state


def test_private_record_module_still_has_the_entry_points_we_use():
    from tensorflow.python.eager import record
    for name in ("could_possibly_record", "should_record_backprop", "stop_recording",
                 "record_operation_backprop_only", "record_operation_forwardprop_only"):
        assert callable(getattr(record, name, None)), f"tensorflow.python.eager.record.{name} moved"


def test_could_record_and_watched_follow_the_tape_stack():
    x, y = tf.constant(1.0), tf.constant(2.0)
    assert not tape_state.could_record()
    with tf.GradientTape() as tape:
        assert tape_state.could_record()
        assert tape_state.watched([x, y]) == [False, False]
        tape.watch(x)
        assert tape_state.watched([x, y]) == [True, False]
        assert tape_state.watched([x * 3.0]) == [True]  # recorded ops' outputs too
        with tape_state.stop_recording():
            assert not tape_state.could_record()
    with tf.autodiff.ForwardAccumulator(x, tf.constant(1.0)):
        assert tape_state.could_record()  # accumulators count
        assert tape_state.watched([x]) == [False]  # ...but are not tapes


def test_recorded_ops_take_the_given_backward_and_forward_functions():
    x = tf.constant(np.float32(3.0))
    with tf.GradientTape() as tape:
        tape.watch(x)
        with tape_state.stop_recording():
            y = tf.identity(x * x)  # unrecorded: its gradient comes from the record below
        tape_state.record_backprop("square", [y], [x], lambda dy: [dy * 2.0 * x])
    assert tape.gradient(y, x).numpy() == 6.0
    with tf.autodiff.ForwardAccumulator(x, tf.constant(np.float32(1.0))) as acc:
        with tape_state.stop_recording():
            y = tf.identity(x * x)
        tape_state.record_forwardprop("square", [y], [x], lambda dy: [dy * 2.0 * x])
    assert acc.jvp(y).numpy() == 6.0
