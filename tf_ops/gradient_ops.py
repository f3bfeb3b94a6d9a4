"""The TF ops around the gradient mechanism's units: gradient cuts and cotangent zeros.

`jax2tf_native.gradients` decides what runs for a call and wraps it in a `tf.custom_gradient`
unit; the other ops it needs are built here: the cuts that give integer (and left-out) outputs
a None gradient, `PreventGradient`, the `tf.stop_gradient` on graph residuals, and the zeros
standing for the cotangents TF leaves out; and `one_xla_cluster`, the mark that lets TF compile
a training step's forward and backward ops as one XLA program. Nothing here knows JAX.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import tensorflow as tf

# The node attribute `tf.xla.experimental.jit_scope` sets (without the `_XlaScope` it also
# sets, which would keep a forward and its backward, built in two scopes, in two clusters).
_XLA_COMPILE = {"_XlaCompile": tf.compat.v1.AttrValue(b=True)}


@contextlib.contextmanager
def one_xla_cluster(enabled: bool = True) -> Iterator[None]:
    """In a graph, marks the ops built inside for XLA compilation (`_XlaCompile`).

    A training step in a `tf.function` without `jit_compile` runs the forward op (with
    residuals) and the backward op as two XLA programs, with the residuals written out in between. Marked alike,
    TF's clustering pass (which runs on every function graph, jit_compile or not) compiles
    them, and the marked ops between them, into one XLA program, as `jit_compile=True` and
    `jax.jit(jax.value_and_grad(f))` do. Only marked ops join: on CPU and GPU TF clusters
    unmarked ops only under auto-clustering (`tf.config.optimizer.set_jit`). Where an unmarked
    op lies between the two (the loss squared in TF before the gradient), TF keeps them apart
    (a cluster may not form a cycle), each still one XLA program as before. Eagerly, or with
    `enabled` False (modules run as plain TF ops, `enable_xla=False`: no XLA anywhere): nothing.

    Example:
        >>> @tf.function(autograph=False)
        ... def f(x):
        ...     with one_xla_cluster():
        ...         y = tf.identity(x, name="marked")
        ...     return y
        >>> graph = f.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
        >>> graph.get_operation_by_name("marked").get_attr("_XlaCompile")
        True
    """
    if tf.executing_eagerly() or not enabled:
        yield
        return
    # Private TF: `Graph._attr_scope` adds node attributes to the ops built in its scope; the
    # public `tf.xla.experimental.jit_scope` uses it. Pinned by
    # tests/tf_ops/test_one_xla_cluster.py.
    with tf.compat.v1.get_default_graph()._attr_scope(_XLA_COMPILE):  # noqa: SLF001
        yield


def prevent_gradient(outputs: Sequence[tf.Tensor], message: str) -> list[tf.Tensor]:
    """Marks outputs so that any TF gradient through them fails with `message`.

    Example:
        >>> y, = prevent_gradient([tf.ones(2)], "no gradient here")
        >>> y.numpy()
        array([1., 1.], dtype=float32)
    """
    return [tf.raw_ops.PreventGradient(input=o, message=message) for o in outputs]


def stop_gradients(tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """The tensors with their gradient path cut (values unchanged)."""
    return [tf.stop_gradient(t) for t in tensors]


def cut_gradients(outputs: Sequence[tf.Tensor], keep: Sequence[int]) -> list[tf.Tensor]:
    """Cuts the gradient path of every output not in `keep`, so a gradient through it is None.

    TF records no ops on integer tensors: re-emitting them outside the unit cuts their path (as
    with jax2tf, their gradient is None, not zeros); float outputs get `tf.stop_gradient`.

    Example:
        >>> x = tf.constant([1.0, 2.0])
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(x)
        ...     kept, cut = cut_gradients([x * 2.0, x * 3.0], keep=(0,))
        >>> tape.gradient(cut, x) is None
        True
    """
    keep = set(keep)
    return [o if j in keep else
            tf.stop_gradient(o) if o.dtype.is_floating or o.dtype.is_complex else tf.identity(o)
            for j, o in enumerate(outputs)]


def cotangents(cts: Sequence, outs: Sequence[tf.Tensor], diff_out: Sequence[int],
               every_output: bool = False) -> list:
    """The cotangents a VJP takes: those of the outputs `diff_out`, zeros where TF left one
    out (None, in graphs). With `every_output`, one per output, as jax.export's VJPs take them:
    the others as float0, which travels in TF as bool zeros.

    Example:
        >>> outs = [tf.ones(2), tf.range(2)]
        >>> [c.dtype.name for c in cotangents([None, None], outs, (0,), every_output=True)]
        ['float32', 'bool']
    """
    taken = {j: cts[j] if cts[j] is not None else tf.zeros_like(outs[j]) for j in diff_out}
    if not every_output:
        return [taken[j] for j in diff_out]
    return [taken[j] if j in taken else tf.zeros_like(o, tf.bool) for j, o in enumerate(outs)]
