"""TF gradients through exported JAX VJPs.

`call` runs a `DifferentiableFunction` on TF tensors and gives TF its gradient. What runs is
decided when the op is built (eagerly, or while a `tf.function` traces), from the gradient
tapes recording at that moment (`tf_ops.tape_state`):

- no tape records (inference): the plain module, exported alone; nothing else is paid. In a
  graph its gradient (`tf.gradients`, or an outer tape around the `tf.function`) is the
  exported VJP of the primal inputs, recomputing the forward pass, as jax2tf's is;
- a tape records, residual mode (default): the forward op also returns the `jax.vjp` residuals
  of the inputs some tape watches, and the backward op (`bwd(residuals, cotangents)`) computes
  those inputs' cotangents only (a training step's data batch takes none): no recomputation;
- recompute mode (jax2tf's behaviour): the plain module forward, the VJP recomputing it.

Higher orders: the backward value comes from the residuals, but the backward step is itself a
custom-gradient unit over (primal inputs, cotangents) whose gradient is the exported VJP of the
VJP. TF never differentiates through the residuals (TF records no ops inside a custom-gradient
forward), so second and higher orders are exact, each level exported on first use.

Edge semantics follow jax2tf: integer/bool inputs get a None gradient; unused float inputs get
zeros; integer outputs take no cotangent; a cotangent TF leaves out is taken as zeros.
"""
from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from jax2tf_native import tf_runner
from jax2tf_native.differentiable import DifferentiableFunction
from tf_ops import tape_state

PREVENT_GRADIENT_MESSAGE = (
    "The function was converted by jax2tf_native with with_gradient=False, so it has no "
    "gradient. Fix: convert with with_gradient=True (the default).")


def prevent_gradient(outputs: Sequence[tf.Tensor],
                     message: str = PREVENT_GRADIENT_MESSAGE) -> list[tf.Tensor]:
    """Marks outputs so that any TF gradient through them fails with a message saying the fix."""
    return [tf.raw_ops.PreventGradient(input=o, message=message) for o in outputs]


GRADIENT_ORDER_MESSAGE = (
    "This gradient was built with gradient_order={order}: TF cannot save (or was asked not to "
    "build) derivatives beyond that order. Fix: convert with gradient_order=None for higher "
    "orders (a SavedModel keeps first-order gradients only).")


def call(node: DifferentiableFunction, values: Sequence[tf.Tensor], asserts: Sequence = (),
         with_gradient: bool = True, gradient_order: int | None = None) -> list[tf.Tensor]:
    """Runs `node` on flat tensors; with a custom gradient unless `with_gradient` is False.

    What runs depends on the gradient tapes recording now (`tf_ops.tape_state`):
    - none (inference, eagerly or while a `tf.function` traces): the plain forward module. In a
      graph its gradient, should `tf.gradients` or an outer tape around the `tf.function` ask
      later, is the recomputing VJP (as jax2tf's);
    - a tape watching inputs: in residual mode the forward module that also returns the
      residuals, and a backward that computes the cotangents of the watched inputs only (a
      training step's data batch takes none). In a graph, `tf.gradients` still sees a gradient
      for every input (recomputing the forward pass for the others).

    `gradient_order` bounds the derivative order (None: unbounded); past it, `PreventGradient`.
    """
    if not with_gradient or gradient_order == 0:
        message = (PREVENT_GRADIENT_MESSAGE if not with_gradient
                   else GRADIENT_ORDER_MESSAGE.format(order="the one requested"))
        return prevent_gradient(tf_runner.call_flat(node.primal(), values, asserts), message)
    diff_in = node.flat.diff_in
    if tape_state.could_record():
        watched = tape_state.watched([values[i] for i in diff_in])
        chosen = tuple(i for i, is_watched in zip(diff_in, watched) if is_watched)
    elif tf.executing_eagerly():
        # Nothing can ask for a gradient of an op run now.
        return tf_runner.call_flat(node.primal(), values, asserts)
    else:
        chosen = ()
    if not chosen:
        # No tape asks (accumulators or later graph gradients may): plain forward, recomputing
        # VJP.
        outputs = _unit(node, values, asserts, gradient_order, _plain_forward(node, asserts))
    elif chosen == diff_in:
        outputs = _unit(node, values, asserts, gradient_order, _forward_of(node, asserts))
    else:
        variant = node.for_inputs(chosen)
        outputs = _split_unit(node, variant, values, asserts, gradient_order)
        return _cut_non_differentiable(variant, outputs)  # the same outputs; exported already
    return _cut_non_differentiable(node, outputs)


def _plain_forward(node: DifferentiableFunction, asserts) -> Callable:
    """`run(xs) -> (outputs, None)`: the plain module; gradients recompute."""
    return lambda xs: (tf_runner.call_flat(node.primal(), xs, asserts), None)


def _forward_of(node: DifferentiableFunction, asserts) -> Callable:
    """`run(xs) -> (outputs, residuals or None)` for `node`'s gradient mode."""
    forward = node.forward() if node.mode == "residuals" else None
    if forward is None:
        return _plain_forward(node, asserts)

    def run(xs):
        everything = tf_runner.call_flat(forward.prepared, xs, asserts)
        computed = everything[forward.n_outputs:]
        if not tf.executing_eagerly():
            # A graph's backward captures the residuals. Under a persistent tape (or any
            # higher-order tape) TF also differentiates what the backward captures; the exact
            # higher orders never go through residuals (see _call_with_value), and in a
            # reloaded SavedModel the forward op has no gradient left: "No gradient defined
            # for operation 'XlaCallModule'". Cut that path explicitly.
            computed = [tf.stop_gradient(r) for r in computed]
        return everything[:forward.n_outputs], forward.structure.residuals(xs, computed)

    return run


def _unit(node: DifferentiableFunction, values, asserts, gradient_order,
          run: Callable) -> list[tf.Tensor]:
    """`run`'s outputs under a `tf.custom_gradient` whose gradient is `node`'s."""

    @tf.custom_gradient
    def unit(*xs):
        outs, residuals = run(list(xs))
        return outs, _grad_fn(node, xs, outs, residuals, gradient_order)

    return _as_list(unit(*values))


def _split_unit(node: DifferentiableFunction, variant: DifferentiableFunction, values, asserts,
                gradient_order) -> list[tf.Tensor]:
    """Runs `variant`'s forward; tapes get `variant`'s gradient (the watched inputs only), while
    graph gradients (`tf.gradients`, an outer tape around a `tf.function`) and forward
    accumulators get `node`'s gradient of every input, which recomputes."""
    run = _forward_of(variant, asserts)
    holder = []

    def run_and_keep(xs):
        outs, residuals = run(xs)
        holder.append((xs, outs, residuals))
        return outs, None  # the registered (graph) gradient recomputes: it may want any input

    with tape_state.stop_recording():
        if tf.executing_eagerly():
            outputs, _ = run_and_keep(list(values))
        else:
            outputs = _unit(node, values, asserts, gradient_order, run_and_keep)
    xs, outs, residuals = holder[0]
    tape_grad = _grad_fn(variant, xs, outs, residuals, gradient_order)
    full_grad = _grad_fn(node, xs, outs, None, gradient_order)
    tape_state.record_backprop(node.flat.name, outputs, values, tape_grad)
    tape_state.record_forwardprop(node.flat.name, outputs, values, full_grad)
    return outputs


def _grad_fn(node: DifferentiableFunction, xs, outs, residuals, gradient_order) -> Callable:
    """The gradient of `outs = node(*xs)`: from `residuals` when given, else recomputing."""
    next_order = None if gradient_order is None else gradient_order - 1

    @_in_vjp_scope
    def grad(*cts):
        diff_out = node.diff_out()
        diff_cts = _cotangents(cts, outs, diff_out)
        vjp = node.vjp_function()
        backward = node.backward() if residuals is not None else None
        if next_order == 0:
            # No custom gradient inside: TF could not save one (SavedModels), and none is
            # wanted. Past this order, PreventGradient explains.
            in_cts = (tf_runner.call_flat(backward, list(residuals) + diff_cts)
                      if backward is not None
                      else tf_runner.call_flat(vjp.primal(), list(xs) + diff_cts))
            in_cts = prevent_gradient(in_cts, GRADIENT_ORDER_MESSAGE.format(
                order=gradient_order))
        elif backward is None:
            in_cts = call(vjp, list(xs) + diff_cts, gradient_order=next_order)
        else:
            in_cts = _call_with_value(
                vjp, list(xs) + diff_cts,
                lambda: tf_runner.call_flat(backward, list(residuals) + diff_cts),
                next_order)
        return _scatter(in_cts, node.flat.diff_in, len(xs))

    return grad


def _cut_non_differentiable(node: DifferentiableFunction, outputs: list) -> list[tf.Tensor]:
    """TF records no ops on integer tensors; re-emitting integer outputs outside the unit cuts
    their gradient path, so a gradient through them is None (as with jax2tf), not zeros.
    Float outputs left out by `gradient_outputs` are cut the same way."""
    diff_out = set(node.diff_out())
    return [o if j in diff_out else
            tf.stop_gradient(o) if o.dtype.is_floating or o.dtype.is_complex else tf.identity(o)
            for j, o in enumerate(outputs)]


def _in_vjp_scope(grad: Callable) -> Callable:
    """Builds the backward ops under the name scope "jax2tf_vjp/", as jax2tf names them."""
    def scoped(*cts):
        with tf.name_scope("jax2tf_vjp"):
            return grad(*cts)
    return scoped


def _call_with_value(node: DifferentiableFunction, inputs: Sequence[tf.Tensor],
                     value: Callable[[], list], gradient_order: int | None) -> list[tf.Tensor]:
    """`node(*inputs)` whose value comes from `value()` (e.g. residuals) but whose gradient is
    `node`'s own exported VJP."""

    @tf.custom_gradient
    def unit(*xs):
        outs = value()

        @_in_vjp_scope
        def grad(*cts):
            diff_cts = _cotangents(cts, outs, node.diff_out())
            in_cts = call(node.vjp_function(), list(xs) + diff_cts,
                          gradient_order=None if gradient_order is None else gradient_order - 1)
            return _scatter(in_cts, node.flat.diff_in, len(xs))

        return outs, grad

    return _as_list(unit(*inputs))


def _cotangents(cts: Sequence, outs: Sequence[tf.Tensor], diff_out: Sequence[int]) -> list:
    """Cotangents of the differentiable outputs; None (graph mode) means zeros."""
    return [cts[j] if cts[j] is not None else tf.zeros_like(outs[j]) for j in diff_out]


def _scatter(in_cts: Sequence[tf.Tensor], diff_in: Sequence[int], n_inputs: int) -> list:
    """Places the cotangents of differentiable inputs; others (integers) get None."""
    result: list = [None] * n_inputs
    for i, ct in zip(diff_in, in_cts):
        result[i] = ct
    return result


def _as_list(result) -> list[tf.Tensor]:
    return list(result) if isinstance(result, (list, tuple)) else [result]
