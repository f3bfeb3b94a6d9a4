"""The JAX functions that gradients export: forward with residuals, backward, recomputed VJP.

Pure JAX, no TF. Each is built from a `flat_function.FlatFunction` and takes and returns flat
lists of arrays, so that it can be exported with `jax.export` and called as one XlaCallModule.
Only the function's inexact inputs and outputs take part (`FlatFunction.diff_in` / `diff_out`).

Residuals are the leaves of the `jax.vjp` pullback (a `jax.tree_util.Partial`): the forward
module returns them next to the outputs, and the backward module rebuilds the pullback from
them with the tree structure recorded while the forward was traced. The forward pass is thus
never recomputed for a first-order gradient.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import jax.extend.core
import jax.numpy as jnp

from jax2tf_native.flat_function import FlatFunction


def _split_inputs(flat: FlatFunction, xs: Sequence):
    diff_in = flat.diff_in

    def on_diff(*diff_xs):
        full = list(xs)
        for i, v in zip(diff_in, diff_xs):
            full[i] = v
        outs = flat.fun(*full)
        diff_out = flat.diff_out([o.dtype for o in outs])
        return [outs[j] for j in diff_out], (outs, diff_out)

    return on_diff, [xs[i] for i in diff_in]


@dataclasses.dataclass
class ResidualForward:
    """`fwd(*xs) -> [*outputs, *computed residuals]` and how to rebuild all residuals.

    Many residuals are simply inputs (a weight matrix the backward multiplies by): returning
    them would copy every parameter out of the forward op on every call, so they are not
    outputs; `residual_sources` says where each residual comes from instead. Residuals the
    pullback never reads (`jax.nn.relu`'s JVP keeps a zeros array the size of its input) are
    neither outputs nor backward inputs: the backward rebuilds them as zeros (`unused`).

    Attributes:
      fwd: the function to export.
      residual_tree: the pullback's tree structure (set when `fwd` is traced by export).
      n_outputs: number of user outputs at the front of fwd's results.
      diff_out: indices of the differentiable outputs.
      residual_sources: per residual the backward takes, ("input", i) for `xs[i]`, or
        ("output", j) for the j-th residual that fwd returns after the user outputs.
      unused: (position among the pullback's leaves, shape, dtype) of each residual the
        pullback does not read; the backward takes the others, in pullback order.
    """
    fwd: Callable[..., list]
    residual_tree: Any = None
    n_outputs: int | None = None
    diff_out: tuple[int, ...] | None = None
    residual_sources: tuple[tuple[str, int], ...] | None = None
    unused: tuple[tuple[int, tuple, Any], ...] = ()

    def residuals(self, xs: Sequence, computed: Sequence) -> list:
        """The residuals the backward takes, in pullback order, from the inputs and fwd's
        extra outputs."""
        return [xs[i] if kind == "input" else computed[i] for kind, i in self.residual_sources]


# Primitives whose JAX JVP rule computes a different primal value than the primitive: JAX
# 0.10's `_reduce_jvp` (general `lax.reduce`) drops a non-identity init_value, so jax.vjp's
# primal of lax.reduce(x, 3.0, lax.add, (0,)) is the sum without the 3.0. The residual forward
# then takes its outputs from the function itself (what jax.jit, and the peer, return).
_JVP_CHANGES_PRIMAL = frozenset({"reduce"})


class RematerializationRequested(Exception):
    """The residual forward is not built: the function holds the differentiated part of a
    jax.checkpoint (e.g. `jax.grad(jax.checkpoint(f))`), whose lowering puts optimization
    barriers around the recomputation. A `jax.vjp` linearization of it evaluates that part
    without them (XLA would then undo the rematerialization), so the forward op is the primal
    function (barriers kept) and gradients recompute it, as jax2tf does."""


# Marks a remat eqn that lowers with optimization barriers (differentiated, prevent_cse).
_REMAT_WITH_BARRIER = "remat with optimization barrier"


def _primitives_bound(fun: Callable, xs: Sequence) -> set[str]:
    """Names of the primitives `fun(*xs)` binds, also inside nested jaxprs (jit, cond, ...),
    plus `_REMAT_WITH_BARRIER` when a jax.checkpoint in it lowers with optimization barriers.

    One extra trace of `fun` per residual forward (measured 2-14 ms for the example CNN)."""
    found: set[str] = set()

    def walk(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive.name)
            if (eqn.primitive is jax.extend.core.primitives.remat_p
                    and eqn.params.get("differentiated") and eqn.params.get("prevent_cse")):
                found.add(_REMAT_WITH_BARRIER)
            for param in eqn.params.values():
                for sub in (param if isinstance(param, (tuple, list)) else (param,)):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jax.make_jaxpr(fun)(*xs).jaxpr)
    return found


def residual_forward(flat: FlatFunction, policy: Callable | None = None) -> ResidualForward:
    """The forward function that also returns the VJP residuals that are not inputs.

    `policy`, a `jax.checkpoint_policies` value, chooses which intermediates are residuals; the
    backward recomputes the rest from them (None: every residual `jax.vjp` keeps).
    """
    result = ResidualForward(fwd=None)

    def fwd(*xs):
        on_diff, diff_xs = _split_inputs(flat, xs)
        if policy is not None:
            on_diff = jax.checkpoint(on_diff, policy=policy)
        bound = _primitives_bound(flat.fun, xs)
        if _REMAT_WITH_BARRIER in bound:
            raise RematerializationRequested(
                "the function differentiates a jax.checkpoint: a residual forward would lose "
                "the optimization barriers that keep XLA from undoing its rematerialization")
        _, pullback, (outs, diff_out) = jax.vjp(on_diff, *diff_xs, has_aux=True)
        if bound & _JVP_CHANGES_PRIMAL:
            outs = flat.fun(*xs)
        residuals, result.residual_tree = jax.tree_util.tree_flatten(pullback)
        result.n_outputs, result.diff_out = len(outs), diff_out
        read = _residuals_read(result.residual_tree, residuals, [outs[j] for j in diff_out])
        computed, sources, unused = [], [], []
        for k, r in enumerate(residuals):
            if not read[k]:
                r = jnp.asarray(r)
                unused.append((k, tuple(r.shape), r.dtype))
                continue
            # Identity, not equality: the residual is the traced input itself.
            same = [i for i, x in enumerate(xs) if r is x]
            if same:
                sources.append(("input", same[0]))
            else:
                sources.append(("output", len(computed)))
                computed.append(jnp.asarray(r))
        result.residual_sources, result.unused = tuple(sources), tuple(unused)
        return list(outs) + computed

    result.fwd = fwd
    return result


def _residuals_read(tree, residuals: Sequence, cts: Sequence) -> list[bool]:
    """Per pullback leaf, whether applying the pullback to `cts` reads it.

    One trace of the pullback (no export): a liveness walk back from its results over the
    top-level equations (a nested jaxpr counts as reading all its inputs if any result is
    live; an effectful equation is always live)."""

    def apply(leaves, cts):
        return jax.tree_util.tree_unflatten(tree, leaves)(list(cts))

    jaxpr = jax.make_jaxpr(apply)(list(residuals), list(cts)).jaxpr
    is_var = lambda v: isinstance(v, jax.extend.core.Var)
    live = {v for v in jaxpr.outvars if is_var(v)}
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if is_var(v))
    return [v in live for v in jaxpr.invars[:len(residuals)]]


def backward_from_residuals(forward: ResidualForward) -> Callable[..., list]:
    """`bwd(*residuals, *cotangents_of_differentiable_outputs) -> cotangents of diff inputs`,
    `residuals` being those the pullback reads (`forward.residual_sources`)."""
    n_res = len(forward.residual_sources)

    def bwd(*res_and_cts):
        leaves = list(res_and_cts[:n_res])
        for k, shape, dtype in forward.unused:  # never read: any value of the right type
            leaves.insert(k, jnp.zeros(shape, dtype))
        pullback = jax.tree_util.tree_unflatten(forward.residual_tree, leaves)
        return list(pullback(list(res_and_cts[n_res:])))

    return bwd


def recompute_vjp(flat: FlatFunction, n_inputs: int) -> Callable[..., list]:
    """`vjp(*xs, *cotangents_of_differentiable_outputs) -> cotangents of diff inputs`.

    Recomputes the forward pass; used for recompute mode and for every order above the first.
    """

    def vjp(*xs_and_cts):
        xs, cts = xs_and_cts[:n_inputs], xs_and_cts[n_inputs:]
        on_diff, diff_xs = _split_inputs(flat, xs)
        _, pullback, _ = jax.vjp(on_diff, *diff_xs, has_aux=True)
        return list(pullback(list(cts)))

    return vjp
