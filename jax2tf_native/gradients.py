"""TF gradients through exported JAX VJPs: the one mechanism behind `convert` and `call_exported`.

`call` runs a node (a `function_node.DifferentiableFunction` for `convert`, an
`exported_node.ExportedFunction` for `call_exported`) on flat TF tensors and gives TF its
gradient. A call's trip goes down, one layer at a time:

    gradients.call             what runs, from the tapes recording now (tf_ops.tape_state)
      -> node.forward_plan     which export the forward op runs, made once (the node's layer:
                               function_node / exported_node -> exporting, vjp_functions)
      -> prepared_export.call_flat   the XlaCallModule op (tf_ops.xla_call_module)
      -> tf_ops.gradient_ops   the gradient cuts around it
    and when TF asks for the gradient, from the unit's backward (this module):
      -> node.backward_plan    the VJP node and the backward export, made on first use
      -> prepared_export.call_flat   the backward op, or `call` on the VJP node: the same trip, one
                               derivative order up

A node offers `name`, `diff_in`, `primal()`, `forward_plan(watched)` and
`backward_plan(with_residuals)`, the plans being data only (`gradient_plans.ForwardPlan`,
`BackwardPlan`), so that this module reads top to bottom and never calls back and forth.
This module builds one kind of TF op itself: the `tf.custom_gradient` units, whose forward and
backward are the functions below (a unit built in `tf_ops` would call back up into them).

What runs is decided when the op is built (eagerly, or while a `tf.function` traces), from the
gradient tapes recording at that moment (`tf_ops.tape_state`):

- no tape records (inference): the primal module, exported alone; nothing else is paid. In a
  graph its gradient (`tf.gradients`, or an outer tape around the `tf.function`) is the
  exported VJP of the primal inputs, recomputing the forward pass, as jax2tf's is;
- a tape records, residual mode (default): the forward op also returns the `jax.vjp` residuals
  of the inputs some tape watches, and the backward op (`bwd(residuals, cotangents)`) computes
  those inputs' cotangents only (a training step's data batch takes none): no recomputation.
  In a graph both are marked for one XLA cluster (`gradient_ops.one_xla_cluster`): in a
  `tf.function` without `jit_compile` a training step's forward and backward run as one XLA program;
- recompute mode (jax2tf's behaviour, and every `call_exported` artifact): the primal module
  forward, the VJP recomputing it.

With `enable_xla=False` every module above (forward, residual forward, backward, each VJP) runs
as ordinary TF ops instead of an XlaCallModule op (`prepared_export.PreparedExport.plain`), and
nothing is marked for an XLA cluster: TF's gradient is still the exported JAX VJP.

Higher orders: the backward value comes from the residuals, but the backward step is itself a
custom-gradient unit over (primal inputs, cotangents) whose gradient is the exported VJP of the
VJP. TF never differentiates through the residuals (TF records no ops inside a custom-gradient
forward), so second and higher orders are exact, each level exported on first use. The
backward of a node is `call` on its VJP node: the same trip, one order up.

Edge semantics follow jax2tf: integer/bool inputs get a None gradient; unused float inputs get
zeros; integer outputs take no cotangent; a cotangent TF leaves out is taken as zeros.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import tensorflow as tf

from jax2tf_native import prepared_export
from tf_ops import arguments as tf_arguments
from tf_ops import gradient_ops, tape_state

# Starts with jax2tf's own sentence (TF prefixes "Gradient explicitly disabled. Reason: ").
PREVENT_GRADIENT_MESSAGE = (
    "The jax2tf-converted function does not support gradients. Use `with_gradient` parameter "
    "to enable gradients: it was converted by jax2tf_native with with_gradient=False, so it "
    "has no gradient. Fix: convert with with_gradient=True (the default).")

GRADIENT_ORDER_MESSAGE = (
    "This gradient was built with gradient_order={order}: TF cannot save (or was asked not to "
    "build) derivatives beyond that order. Fix: convert with gradient_order=None for higher "
    "orders (a SavedModel keeps first-order gradients only).")



def call(node, values: Sequence, asserts: Sequence = (), with_gradient: bool = True,
         gradient_order: int | None = None) -> list:
    """Runs `node` on flat tensors; with a custom gradient unless `with_gradient` is False.

    What runs depends on the gradient tapes recording now (`tf_ops.tape_state`):
    - none (inference, eagerly or while a `tf.function` traces): the primal module. In a
      graph its gradient, should `tf.gradients` or an outer tape around the `tf.function` ask
      later, is the recomputing VJP (as jax2tf's);
    - a tape watching inputs: in residual mode the forward module that also returns the
      residuals, and a backward that computes the cotangents of the watched inputs only (a
      training step's data batch takes none). In a graph, `tf.gradients` still sees a gradient
      for every input (recomputing the forward pass for the others).

    `gradient_order` bounds the derivative order (None: unbounded); past it, `PreventGradient`.

    Example:
        >>> import jax.numpy as jnp
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
            prepared_export.call_flat(node.primal(), values, asserts), message)
    watched = tape_state.watched_inputs(values, node.diff_in)
    if watched is None:
        # Nothing can ask for a gradient of an op run now.
        return prepared_export.call_flat(node.primal(), values, asserts)
    plan = node.forward_plan(watched)
    if plan.node is node:
        outputs = _unit(node, values, _forward(plan, asserts), gradient_order)
    else:
        outputs = _split_unit(node, plan, values, asserts, gradient_order)
    return gradient_ops.cut_gradients(outputs, keep=plan.diff_out)


def _forward(plan, asserts) -> Callable:
    """`run(xs) -> (outputs, residuals or None)`: the forward op of `plan`."""

    def run(xs):
        if plan.residual_sources is None:
            return prepared_export.call_flat(plan.prepared, xs, asserts), None
        # In a graph, one XLA program with the backward op (see gradient_ops.one_xla_cluster):
        # the residuals then never leave it. Plain TF ops (enable_xla=False) are not marked.
        with gradient_ops.one_xla_cluster(enabled=not plan.prepared.plain):
            everything = prepared_export.call_flat(plan.prepared, xs, asserts)
            computed = everything[plan.n_outputs:]
            if not tf.executing_eagerly():
                # A graph's backward captures the residuals. Under a persistent tape (or any
                # higher-order tape) TF also differentiates what the backward captures; the
                # exact higher orders never go through residuals (see _call_with_value), and
                # in a reloaded SavedModel the forward op has no gradient left: "No gradient
                # defined for operation 'XlaCallModule'". Cut that path explicitly.
                computed = gradient_ops.stop_gradients(computed)
        residuals = [xs[i] if kind == "input" else computed[i]
                     for kind, i in plan.residual_sources]
        return everything[:plan.n_outputs], residuals

    return run


def _unit(node, values, run: Callable, gradient_order) -> list:
    """`run`'s outputs under a `tf.custom_gradient` whose gradient is `node`'s."""

    @tf.custom_gradient
    def unit(*xs):
        outs, residuals = run(list(xs))
        return outs, _gradient(node, xs, outs, residuals, gradient_order)

    result = unit(*values)
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _split_unit(node, plan, values, asserts, gradient_order) -> list:
    """Runs the forward of `plan.node` (the variant for the watched inputs); tapes get its
    gradient (the watched inputs only), while graph gradients (`tf.gradients`, an outer tape
    around a `tf.function`) and forward accumulators get `node`'s gradient of every input,
    which recomputes."""
    run = _forward(plan, asserts)
    holder = []

    def run_and_keep(xs):
        outs, residuals = run(xs)
        holder.append((xs, outs, residuals))
        return outs, None  # the registered (graph) gradient recomputes: it may want any input

    with tape_state.stop_recording():
        if tf.executing_eagerly():
            outputs, _ = run_and_keep(list(values))
        else:
            outputs = _unit(node, values, run_and_keep, gradient_order)
    xs, outs, residuals = holder[0]
    tape_grad = _gradient(plan.node, xs, outs, residuals, gradient_order)
    full_grad = _gradient(node, xs, outs, None, gradient_order)
    tape_state.record_backprop(node.name, outputs, values, tape_grad)
    tape_state.record_forwardprop(node.name, outputs, values, full_grad)
    return outputs


def _gradient(node, xs, outs, residuals, gradient_order) -> Callable:
    """The gradient of `outs = node(*xs)`: from `residuals` when given, else recomputing.

    Its ops are built under the name scope "jax2tf_vjp/", as jax2tf names them."""
    next_order = None if gradient_order is None else gradient_order - 1

    def grad(*cts):
        with tf.name_scope("jax2tf_vjp"):
            plan = node.backward_plan(with_residuals=residuals is not None)
            # The cotangent zeros too: an unmarked op fed by the forward op between the two
            # would keep them in two XLA programs.
            with (gradient_ops.one_xla_cluster() if plan.backward is not None
                  and not plan.backward.plain else contextlib.nullcontext()):
                cotangents = gradient_ops.cotangents(cts, outs, plan.diff_out, plan.every_array)
            vjp_args = list(xs) + cotangents
            if not tf.executing_eagerly():
                # As jax2tf names its VJP's inputs (primal inputs, then cotangents), so that
                # tools find `jax2tf_vjp/jax2tf_arg_N`; identities, free once compiled.
                vjp_args = tf_arguments.named(vjp_args, "jax2tf_arg_{}")
            if plan.backward is not None:
                def value():
                    with gradient_ops.one_xla_cluster(enabled=not plan.backward.plain):
                        return prepared_export.call_flat(plan.backward, list(residuals) + cotangents)
            if next_order == 0:
                # No custom gradient inside: TF could not save one (SavedModels), and none is
                # wanted. Past this order, PreventGradient explains.
                in_cts = (value() if plan.backward is not None
                          else prepared_export.call_flat(plan.vjp.primal(), vjp_args))
                in_cts = gradient_ops.prevent_gradient(in_cts, GRADIENT_ORDER_MESSAGE.format(
                    order=gradient_order))
            elif plan.backward is None:
                in_cts = call(plan.vjp, vjp_args, gradient_order=next_order)
            else:
                in_cts = _call_with_value(plan.vjp, vjp_args, value, next_order)
            if plan.every_array:
                in_cts = [in_cts[i] for i in plan.diff_in]
            if not tf.executing_eagerly():
                in_cts = _named_per_input(in_cts, plan.diff_in, xs)
            return _scatter(in_cts, plan.diff_in, len(xs))

    return grad


def _call_with_value(node, inputs: Sequence, value: Callable[[], list],
                     gradient_order: int | None) -> list:
    """`node(*inputs)` whose value comes from `value()` (e.g. residuals) but whose gradient is
    `node`'s own exported VJP."""
    return _unit(node, inputs, lambda xs: (value(), None), gradient_order)


def _named_per_input(in_cts: Sequence, diff_in: Sequence[int], xs: Sequence) -> list:
    """The cotangents through identities named as jax2tf's VJP names its results: one
    `jax2tf_out`, `jax2tf_out_1`, ... per input, in input order. jax2tf's VJP returns a
    cotangent for every input; ours computes the differentiated ones only, so an input the
    tape does not watch gets zeros that nothing reads (TF prunes them), to keep the names of
    the inputs after it where tools look for them."""
    by_input = dict(zip(diff_in, in_cts))
    named = tf_arguments.named([by_input[i] if i in by_input else tf.zeros_like(x)
                                for i, x in enumerate(xs)], "jax2tf_out")
    return [named[i] for i in diff_in]


def _scatter(in_cts: Sequence, diff_in: Sequence[int], n_inputs: int) -> list:
    """Places the cotangents of differentiable inputs; others (integers) get None."""
    result: list = [None] * n_inputs
    for i, ct in zip(diff_in, in_cts):
        result[i] = ct
    return result
