"""What TF's gradient tapes record right now, and recording an op on them by hand.

TF has no public query for "will a gradient be asked of this op?", yet the answer decides what
the converted function should run: without a recording tape (inference, eagerly or while
`tf.function` traces) the primal module is enough, and a tape that watches only some
inputs (a training step's parameters, not its data batch) needs only their cotangents. TF's
own `tf.custom_gradient` asks the same private module (`tensorflow.python.eager.record`); we do
it here only, pinned by tests/tf_ops/test_tape_state.py, which fails loudly if TF moves it.
"""
from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf
# Private: the tape stack's queries and recorders. tf.custom_gradient is built on these; there
# is no public equivalent (tf.GradientTape only exposes its own watched tensors).
from tensorflow.python.eager import record as _record


def could_record() -> bool:
    """Whether any gradient tape or forward accumulator is active on this thread (not stopped).

    False means no gradient can ever be asked of an op run now through a tape; in a graph,
    `tf.gradients` or the gradient of a `tf.function` call can still ask later.
    """
    return _record.could_possibly_record()


def watched(tensors: Sequence[tf.Tensor]) -> list[bool]:
    """Per tensor: whether any active gradient tape records gradients flowing to it.

    A tape that does not record a tensor now can never ask for its gradient through an op run
    now. Forward accumulators are not counted (see `record_forwardprop`).
    """
    return [bool(_record.should_record_backprop([t])) for t in tensors]


def watched_inputs(values: Sequence[tf.Tensor], candidates: Sequence[int]
                   ) -> tuple[int, ...] | None:
    """Which of `values[i]`, `i` in `candidates`, a recording gradient tape watches now.

    Returns None when no gradient can ever be asked of an op run now (eager, and no tape or
    accumulator active); () when none is watched but one may still be asked (an accumulator,
    or in a graph `tf.gradients` / an outer tape later).

    Example:
        >>> x, y = tf.constant(1.0), tf.constant(2.0)
        >>> watched_inputs([x, y], (0, 1)) is None
        True
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(y)
        ...     watched_inputs([x, y], (0, 1))
        (1,)
    """
    if could_record():
        return tuple(i for i, w in zip(candidates, watched([values[i] for i in candidates]))
                     if w)
    return None if tf.executing_eagerly() else ()


def stop_recording():
    """A context in which ops are recorded on no tape or accumulator (as inside a custom
    gradient's forward function)."""
    return _record.stop_recording()


def record_backprop(name: str, outputs: Sequence[tf.Tensor], inputs: Sequence[tf.Tensor],
                    backward: Callable[..., list]) -> None:
    """Records `outputs = op(inputs)` on every gradient tape with `backward(*output_grads)`
    returning one gradient (or None) per input."""
    _record.record_operation_backprop_only(name, list(outputs), list(inputs), backward)


def record_forwardprop(name: str, outputs: Sequence[tf.Tensor], inputs: Sequence[tf.Tensor],
                       backward: Callable[..., list]) -> None:
    """Records the op on every forward accumulator (`tf.autodiff.ForwardAccumulator`), which
    transposes `backward` for JVPs; a no-op when none is active."""
    _record.record_operation_forwardprop_only(name, list(outputs), list(inputs), backward, None)

