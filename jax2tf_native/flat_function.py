"""`flatten_user_function`, the first step of every `convert`: the user's function as a
`FlatFunction` of array leaves, which every export of it (and `vjp_functions`) takes.

Only inexact (float/complex) inputs and outputs take part in differentiation
(`is_differentiable`, `FlatFunction.diff_in` / `diff_out`): integer and bool inputs get no
cotangent (TF reports None, as with jax2tf), and integer outputs take none, so no float0 value
ever crosses into TF. Pure JAX, no TF.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax2tf_native.errors import GradientSpecError


def is_differentiable(dtype) -> bool:
    return bool(jnp.issubdtype(np.dtype(dtype), jnp.inexact))


@dataclasses.dataclass
class FlatFunction:
    """A JAX function on flat arrays: `fun(*flat_in) -> list of flat outputs`.

    Attributes:
      fun: the flat function.
      in_avals: `jax.ShapeDtypeStruct` of each input (dims may be symbolic).
      name: used in export names and error messages.
      out_tree: the user's result pytree, known once the function was traced (None before).
      gradient_inputs: indices of the inputs gradients may be taken for (None: all). The
        others are treated like integer inputs: no cotangent is computed or returned.
      gradient_outputs: positions in the user's result tuple that take gradients (None: all);
        the others are treated like integer outputs: no residuals, no cotangent.
    """
    fun: Callable[..., list]
    in_avals: tuple
    name: str
    out_tree: Any = None
    gradient_inputs: tuple[int, ...] | None = None
    gradient_outputs: tuple[int, ...] | None = None

    def diff_out(self, out_dtypes: Sequence) -> tuple[int, ...]:
        """The outputs that take a cotangent: float/complex, and among `gradient_outputs`."""
        allowed = (None if self.gradient_outputs is None
                   else output_leaves(self.out_tree, self.gradient_outputs, self.name))
        return tuple(j for j, dtype in enumerate(out_dtypes)
                     if is_differentiable(dtype) and (allowed is None or j in allowed))

    def with_gradient_inputs(self, gradient_inputs: Sequence[int]) -> "FlatFunction":
        """The same function with gradients for `gradient_inputs` only; shares the result tree."""
        variant = dataclasses.replace(self, gradient_inputs=tuple(gradient_inputs))

        def fun(*flat_args):
            outs = self.fun(*flat_args)
            variant.out_tree = self.out_tree
            return outs

        variant.fun = fun
        return variant

    @functools.cached_property
    def diff_in(self) -> tuple[int, ...]:
        """The inputs that take a cotangent: float/complex, and among `gradient_inputs`
        (fixed at construction; read on every call, so computed once)."""
        allowed = (range(len(self.in_avals)) if self.gradient_inputs is None
                   else self.gradient_inputs)
        return tuple(i for i in allowed if is_differentiable(self.in_avals[i].dtype))


def output_leaves(out_tree, positions: Sequence[int], name: str) -> set[int]:
    """Flat leaf indices of the results at `positions` of a tuple/list result (a result that
    is not a tuple or list is position 0)."""
    structure = jax.tree_util.tree_unflatten(out_tree, range(out_tree.num_leaves))
    results = list(structure) if isinstance(structure, (tuple, list)) else [structure]
    if positions and max(positions) >= len(results):
        raise GradientSpecError(
            f"gradient_outputs={list(positions)} names result {max(positions)}, but {name} "
            f"returns {len(results)} result(s). Fix: count from 0 over the elements of the "
            f"returned tuple or list; a result that is not one (an array, a dict) is result 0 "
            f"as a whole.")
    return {leaf for p in positions for leaf in jax.tree_util.tree_leaves(results[p])}


def flatten_user_function(fun: Callable, in_tree, in_avals: Sequence, name: str,
                          gradient_inputs: Sequence[int] | None = None,
                          gradient_outputs: Sequence[int] | None = None) -> FlatFunction:
    """Wraps `fun(*args, **kwargs)` as a flat function; records its result tree on tracing."""
    flat = FlatFunction(
        fun=None, in_avals=tuple(in_avals), name=name,
        gradient_inputs=None if gradient_inputs is None else tuple(gradient_inputs),
        gradient_outputs=None if gradient_outputs is None else tuple(gradient_outputs))

    def flat_fun(*flat_args):
        args, kwargs = jax.tree_util.tree_unflatten(in_tree, flat_args)
        leaves, flat.out_tree = jax.tree_util.tree_flatten(fun(*args, **kwargs))
        return leaves

    flat.fun = flat_fun
    return flat
