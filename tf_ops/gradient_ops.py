"""The TF ops of the gradient mechanism: custom-gradient units and gradient cuts.

`jax2tf_native.gradients` decides what runs for a call (from the tapes recording now); the ops
that carry that decision into TF are built here: a `tf.custom_gradient` unit around the forward
op, the cuts that give integer (and left-out) outputs a None gradient, `PreventGradient`, the
zeros TF leaves out, and the "jax2tf_vjp/" name scope of the backward ops. Nothing here knows
JAX: values are TF tensors, gradients are Python callables.

Example:
    >>> import tensorflow as tf
    >>> x = tf.constant([1.0, 2.0])
    >>> def forward(xs):
    ...     return [xs[0] * 3.0], None
    >>> def make_gradient(xs, outs, state):
    ...     return lambda ct: [ct * 3.0]
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y, = custom_gradient_unit([x], forward, make_gradient)
    >>> tape.gradient(y, x).numpy()
    array([3., 3.], dtype=float32)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

GradientMaker = Callable[[Sequence[tf.Tensor], Sequence[tf.Tensor], Any], Callable[..., list]]


def executing_eagerly() -> bool:
    """Whether ops run now (eager) rather than being added to a graph being traced."""
    return tf.executing_eagerly()


def custom_gradient_unit(values: Sequence[tf.Tensor],
                         forward: Callable[[list], tuple[list, Any]],
                         make_gradient: GradientMaker) -> list[tf.Tensor]:
    """`forward(values)`'s outputs as one TF gradient unit.

    Args:
      values: the unit's inputs.
      forward: `forward(xs) -> (outputs, state)`; builds the forward ops. TF records nothing
        inside it: the unit's only gradient is the one `make_gradient` returns.
      make_gradient: `make_gradient(xs, outputs, state) -> grad(*output_cotangents)` returning
        one cotangent (or None) per input; its ops are built under "jax2tf_vjp/".
    """

    @tf.custom_gradient
    def unit(*xs):
        outs, state = forward(list(xs))
        return outs, in_vjp_scope(make_gradient(xs, outs, state))

    return as_list(unit(*values))


def in_vjp_scope(grad: Callable) -> Callable:
    """`grad` building its ops under the name scope "jax2tf_vjp/", as jax2tf names them."""
    def scoped(*cts):
        with tf.name_scope("jax2tf_vjp"):
            return grad(*cts)
    return scoped


def prevent_gradient(outputs: Sequence[tf.Tensor], message: str) -> list[tf.Tensor]:
    """Marks outputs so that any TF gradient through them fails with `message`."""
    return [tf.raw_ops.PreventGradient(input=o, message=message) for o in outputs]


def stop_gradients(tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """The tensors with their gradient path cut (values unchanged)."""
    return [tf.stop_gradient(t) for t in tensors]


def cut_gradients(outputs: Sequence[tf.Tensor], keep: Sequence[int]) -> list[tf.Tensor]:
    """Cuts the gradient path of every output not in `keep`, so a gradient through it is None.

    TF records no ops on integer tensors: re-emitting them outside the unit cuts their path (as
    with jax2tf, their gradient is None, not zeros); float outputs get `tf.stop_gradient`.

    Example:
        >>> [t.dtype.name for t in cut_gradients([tf.ones(2), tf.range(2)], keep=(0,))]
        ['float32', 'int32']
    """
    keep = set(keep)
    return [o if j in keep else
            tf.stop_gradient(o) if o.dtype.is_floating or o.dtype.is_complex else tf.identity(o)
            for j, o in enumerate(outputs)]


def cotangents(cts: Sequence, outs: Sequence[tf.Tensor], diff_out: Sequence[int]) -> list:
    """Cotangents of the outputs `diff_out`; one TF left out (None, in graphs) means zeros."""
    return [cts[j] if cts[j] is not None else tf.zeros_like(outs[j]) for j in diff_out]


def bool_zeros_like(tensor: tf.Tensor) -> tf.Tensor:
    """A bool zeros tensor of `tensor`'s shape: how a JAX float0 cotangent travels in TF."""
    return tf.zeros_like(tensor, tf.bool)


def scatter(in_cts: Sequence[tf.Tensor], diff_in: Sequence[int], n_inputs: int) -> list:
    """Places the cotangents of the inputs `diff_in`; the others (integers) get None.

    Example:
        >>> scatter(["a", "b"], (0, 2), 3)
        ['a', None, 'b']
    """
    result: list = [None] * n_inputs
    for i, ct in zip(diff_in, in_cts):
        result[i] = ct
    return result


def as_list(result) -> list[tf.Tensor]:
    return list(result) if isinstance(result, (list, tuple)) else [result]
