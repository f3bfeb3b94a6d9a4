"""Pytree example arguments (e.g. a dict of `token_ids` and `padding_mask`) as flat, named
signature inputs: a serving signature takes named tensors, not nested structures."""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import jax
import numpy as np

from jax2tf_native import tf_variables
from tf_ops import dtypes as tf_dtypes


@dataclasses.dataclass(frozen=True)
class FlatInputs:
    """Example arguments flattened to arrays, one signature input each.

    Attributes:
      arrays: the leaves of every example argument, in `jax.tree` order.
      polymorphic_shapes: one spec (or None) per leaf.
      names: one signature input name per leaf, e.g. "token_ids" for `args[0]['token_ids']`.
      treedef: the structure of the argument tuple (`unflatten` rebuilds it).
    """
    arrays: list
    polymorphic_shapes: list
    names: list
    treedef: Any

    @property
    def is_flat(self) -> bool:
        """True when every argument was already a single array."""
        return self.treedef == jax.tree_util.tree_structure(tuple(range(len(self.arrays))))

    def wrap(self, fn: Callable) -> Callable:
        """`fn(params, *args)` as `flat_fn(params, *leaves)`."""
        if self.is_flat:
            return fn
        treedef = self.treedef

        def flat_fn(params, *leaves):
            return fn(params, *jax.tree_util.tree_unflatten(treedef, leaves))

        flat_fn.__name__ = getattr(fn, "__name__", "fn")
        return flat_fn


def _is_spec(x) -> bool:
    return x is None or isinstance(x, str)


def _example_array(where: str, arg) -> np.ndarray:
    """The example leaf as an array, or a TypeError naming it (np.asarray would accept None or
    strings as object/str arrays and fail later with a confusing message)."""
    array = np.asarray(arg) if arg is not None else None
    try:
        if array is None or array.dtype.kind in "OUS":
            raise TypeError("not numeric")
        tf_dtypes.to_tf_dtype(array.dtype)
    except TypeError:
        raise TypeError(f"{where} is {type(arg).__name__} ({arg!r:.40}), not a numeric array. "
                        f"Fix: pass arrays (bool, int, float incl. bfloat16, complex), or "
                        f"pytrees (dicts, lists) of them, one per input after params.") from None
    return array


def _leaf_name(key_path) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(tf_variables.key_parts(key_path)))


def flatten(example_args: Sequence[Any], polymorphic_shapes: Sequence, input_names,
            where: str = "example_args") -> FlatInputs:
    """Flattens pytree example arguments into named array inputs.

    An array argument keeps its input name (`input_names[i]`, default "input_<i>"). The leaves
    of a pytree argument are named by their key path joined with "_" ("token_ids",
    "encoder_mask"), after the argument's input name when `input_names` is given or when there
    are several arguments ("inputs_token_ids").

    Args:
      example_args: one array or pytree of arrays per argument after params.
      polymorphic_shapes: one spec per argument: None, a string for every leaf, or a pytree
        prefix of the argument with strings/None.
      input_names: None or one name per argument.
      where: how errors name the arguments.

    Raises:
      TypeError: a leaf is not a numeric array.
      ValueError: a polymorphic shape spec is not a prefix of its argument.

    Example:
        >>> ids, mask = np.zeros((2, 5), np.int32), np.ones((2, 5), np.bool_)
        >>> flat = flatten([{"token_ids": ids, "padding_mask": mask}], ["(b, t)"], None)
        >>> flat.names
        ['padding_mask', 'token_ids']
    """
    arrays, specs, names = [], [], []
    for i, (arg, spec) in enumerate(zip(example_args, polymorphic_shapes)):
        leaves_with_path = jax.tree_util.tree_flatten_with_path(arg)[0]
        if not leaves_with_path:
            raise TypeError(f"{where}[{i}] holds no arrays ({arg!r:.40}). Fix: pass one array "
                            f"or pytree of arrays per input after params.")
        is_array = len(leaves_with_path) == 1 and not leaves_with_path[0][0]
        prefix_leaves, prefix_def = jax.tree_util.tree_flatten(spec, is_leaf=_is_spec)
        try:
            subtrees = prefix_def.flatten_up_to(arg)
        except (ValueError, TypeError) as e:
            raise ValueError(f"polymorphic_shapes[{i}] {spec!r} is not a pytree prefix of "
                             f"{where}[{i}] ({jax.tree_util.tree_structure(arg)}): {e}. Fix: "
                             f"one string for every leaf, or a dict with the same keys.") from None
        for leaf_spec, subtree in zip(prefix_leaves, subtrees):
            specs += [leaf_spec] * len(jax.tree_util.tree_leaves(subtree))
        for key_path, leaf in leaves_with_path:
            leaf_where = f"{where}[{i}]{jax.tree_util.keystr(key_path)}"
            arrays.append(_example_array(leaf_where, leaf))
            given = input_names[i] if input_names is not None and i < len(input_names) else None
            if is_array:
                names.append(given or f"input_{i}")
                continue
            name = _leaf_name(key_path)
            prefix = given or (f"input_{i}" if len(example_args) > 1 or not name[:1].isalpha()
                               else "")
            names.append(f"{prefix}_{name}" if prefix else name)
    treedef = jax.tree_util.tree_structure(tuple(example_args))
    return FlatInputs(arrays, specs, names, treedef)
