"""TF gradients through exported JAX VJPs: the one mechanism behind `convert` and `call_exported`.

`call` runs a node (a `differentiable.DifferentiableFunction` for `convert`, an
`exported_function.ExportedFunction` for `call_exported`) on flat TF tensors and gives TF its
gradient. A call's trip goes down, one layer at a time:

    gradients.call           what runs, from the tapes recording now (this module)
      -> the node            its exports, made once each (differentiable / exported_function)
      -> tf_runner.call_flat the XlaCallModule op (tf_ops.xla_call_module)
      -> tf_ops.gradient_ops the custom-gradient unit and gradient cuts around it

What runs is decided when the op is built (eagerly, or while a `tf.function` traces), from the
gradient tapes recording at that moment (`tf_ops.tape_state`):

- no tape records (inference): the plain module, exported alone; nothing else is paid. In a
  graph its gradient (`tf.gradients`, or an outer tape around the `tf.function`) is the
  exported VJP of the primal inputs, recomputing the forward pass, as jax2tf's is;
- a tape records, residual mode (default): the forward op also returns the `jax.vjp` residuals
  of the inputs some tape watches, and the backward op (`bwd(residuals, cotangents)`) computes
  those inputs' cotangents only (a training step's data batch takes none): no recomputation;
- recompute mode (jax2tf's behaviour, and every `call_exported` artifact): the plain module
  forward, the VJP recomputing it.

Higher orders: the backward value comes from the residuals, but the backward step is itself a
custom-gradient unit over (primal inputs, cotangents) whose gradient is the exported VJP of the
VJP. TF never differentiates through the residuals (TF records no ops inside a custom-gradient
forward), so second and higher orders are exact, each level exported on first use. The
backward of a node is `call` on its VJP node: the same trip, one order up.

Edge semantics follow jax2tf: integer/bool inputs get a None gradient; unused float inputs get
zeros; integer outputs take no cotangent; a cotangent TF leaves out is taken as zeros.
"""
from __future__ import annotations

from typing import Callable, Sequence

from jax2tf_native import tf_runner
from tf_ops import gradient_ops, tape_state

PREVENT_GRADIENT_MESSAGE = (
    "The function was converted by jax2tf_native with with_gradient=False, so it has no "
    "gradient. Fix: convert with with_gradient=True (the default).")

GRADIENT_ORDER_MESSAGE = (
    "This gradient was built with gradient_order={order}: TF cannot save (or was asked not to "
    "build) derivatives beyond that order. Fix: convert with gradient_order=None for higher "
    "orders (a SavedModel keeps first-order gradients only).")



def call(node, values: Sequence, asserts: Sequence = (), with_gradient: bool = True,
         gradient_order: int | None = None) -> list:
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

    Example:
        >>> import jax.numpy as jnp, tensorflow as tf
        >>> from jax2tf_native import convert
        >>> x = tf.constant([0.0, 1.0])
        >>> with tf.GradientTape() as tape:   # convert's __call__ ends in gradients.call
        ...     tape.watch(x)
        ...     y = convert(jnp.sin)(x)
        >>> tape.gradient(y, x).numpy()
        array([1.       , 0.5403023], dtype=float32)
    """
    if not with_gradient or gradient_order == 0:
        message = (PREVENT_GRADIENT_MESSAGE if not with_gradient
                   else GRADIENT_ORDER_MESSAGE.format(order="the one requested"))
        return gradient_ops.prevent_gradient(
            tf_runner.call_flat(node.primal(), values, asserts), message)
    chosen = _watched_inputs(node, values)
    if chosen is None:
        # Nothing can ask for a gradient of an op run now.
        return tf_runner.call_flat(node.primal(), values, asserts)
    variant = node.for_inputs(chosen) if chosen else None
    if variant is None:
        # No tape asks (accumulators or later graph gradients may): plain forward, recomputing
        # VJP.
        outputs = _unit(node, values, _plain_forward(node, asserts), gradient_order)
    elif variant is node:
        outputs = _unit(node, values, _forward_of(node, asserts), gradient_order)
    else:
        outputs = _split_unit(node, variant, values, asserts, gradient_order)
        node = variant  # the same outputs, and the variant knows them already (no export)
    return gradient_ops.cut_gradients(outputs, keep=node.diff_out())


def _watched_inputs(node, values: Sequence) -> tuple[int, ...] | None:
    """The differentiable inputs some recording tape watches; None when no gradient can ever be
    asked (eager, nothing records); () when none is watched (graph gradients may still ask)."""
    diff_in = node.diff_in
    if tape_state.could_record():
        watched = tape_state.watched([values[i] for i in diff_in])
        return tuple(i for i, is_watched in zip(diff_in, watched) if is_watched)
    return None if gradient_ops.executing_eagerly() else ()


# Forward builders: `run(xs) -> (outputs, residuals or None)`.

def _plain_forward(node, asserts) -> Callable:
    """The plain module; gradients recompute."""
    return lambda xs: (tf_runner.call_flat(node.primal(), xs, asserts), None)


def _forward_of(node, asserts) -> Callable:
    """The forward of `node`'s gradient mode: with residuals when it has a residual forward."""
    forward = node.forward() if node.mode == "residuals" else None
    if forward is None:
        return _plain_forward(node, asserts)

    def run(xs):
        everything = tf_runner.call_flat(forward.prepared, xs, asserts)
        computed = everything[forward.n_outputs:]
        if not gradient_ops.executing_eagerly():
            # A graph's backward captures the residuals. Under a persistent tape (or any
            # higher-order tape) TF also differentiates what the backward captures; the exact
            # higher orders never go through residuals (see _call_with_value), and in a
            # reloaded SavedModel the forward op has no gradient left: "No gradient defined
            # for operation 'XlaCallModule'". Cut that path explicitly.
            computed = gradient_ops.stop_gradients(computed)
        return everything[:forward.n_outputs], forward.residuals(xs, computed)

    return run


# Units: the forward under a custom gradient.

def _unit(node, values, run: Callable, gradient_order) -> list:
    """`run`'s outputs under a `tf.custom_gradient` whose gradient is `node`'s."""
    return gradient_ops.custom_gradient_unit(
        values, run, lambda xs, outs, residuals: _gradient(node, xs, outs, residuals,
                                                           gradient_order))


def _split_unit(node, variant, values, asserts, gradient_order) -> list:
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
        if gradient_ops.executing_eagerly():
            outputs, _ = run_and_keep(list(values))
        else:
            outputs = _unit(node, values, run_and_keep, gradient_order)
    xs, outs, residuals = holder[0]
    tape_grad = gradient_ops.in_vjp_scope(
        _gradient(variant, xs, outs, residuals, gradient_order))
    full_grad = gradient_ops.in_vjp_scope(_gradient(node, xs, outs, None, gradient_order))
    tape_state.record_backprop(node.name, outputs, values, tape_grad)
    tape_state.record_forwardprop(node.name, outputs, values, full_grad)
    return outputs


# Backward: the gradient of a unit.

def _gradient(node, xs, outs, residuals, gradient_order) -> Callable:
    """The gradient of `outs = node(*xs)`: from `residuals` when given, else recomputing."""
    next_order = None if gradient_order is None else gradient_order - 1

    def grad(*cts):
        vjp = node.vjp_function()
        vjp_args = _vjp_arguments(node, xs, outs, cts)
        backward = node.backward() if residuals is not None else None
        if backward is not None:
            diff_cts = vjp_args[len(xs):]
            value = lambda: tf_runner.call_flat(backward, list(residuals) + diff_cts)
        if next_order == 0:
            # No custom gradient inside: TF could not save one (SavedModels), and none is
            # wanted. Past this order, PreventGradient explains.
            in_cts = (value() if backward is not None
                      else tf_runner.call_flat(vjp.primal(), vjp_args))
            in_cts = gradient_ops.prevent_gradient(in_cts, GRADIENT_ORDER_MESSAGE.format(
                order=gradient_order))
        elif backward is None:
            in_cts = call(vjp, vjp_args, gradient_order=next_order)
        else:
            in_cts = _call_with_value(vjp, vjp_args, value, next_order)
        return gradient_ops.scatter(_input_cotangents(node, in_cts), node.diff_in, len(xs))

    return grad


def _call_with_value(node, inputs: Sequence, value: Callable[[], list],
                     gradient_order: int | None) -> list:
    """`node(*inputs)` whose value comes from `value()` (e.g. residuals) but whose gradient is
    `node`'s own exported VJP."""
    return gradient_ops.custom_gradient_unit(
        inputs, lambda xs: (value(), None),
        lambda xs, outs, _: _gradient(node, xs, outs, None, gradient_order))


def _vjp_arguments(node, xs, outs, cts) -> list:
    """The arguments of `node`'s VJP: the primal inputs, then the output cotangents."""
    diff_out = node.diff_out()
    diff_cts = gradient_ops.cotangents(cts, outs, diff_out)
    if node.vjp_takes_every_array:
        # jax.export's `Exported.vjp()`: one cotangent per output (float0, i.e. bool zeros,
        # for integer outputs), and one per input back.
        by_output = gradient_ops.scatter(diff_cts, diff_out, len(outs))
        diff_cts = [ct if ct is not None else gradient_ops.bool_zeros_like(o)
                    for ct, o in zip(by_output, outs)]
    return list(xs) + diff_cts


def _input_cotangents(node, in_cts: Sequence) -> list:
    """The VJP's results for the differentiable inputs, in `node.diff_in` order."""
    if node.vjp_takes_every_array:
        return [in_cts[i] for i in node.diff_in]
    return list(in_cts)
