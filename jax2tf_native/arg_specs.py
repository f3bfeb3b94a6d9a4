"""Turns `polymorphic_shapes` plus the arguments into `jax.ShapeDtypeStruct`s for `jax.export`.

Accepts exactly what `jax.export.symbolic_args_specs` accepts (a single string for all
arguments, or a pytree prefix of the positional arguments whose leaves are None or shape strings
such as "b, ...", "(b, 28, 28, 1)", "_", "2*b", "b + 1"), but checks each leaf itself so that an
error names the argument path, the dimension, and the fix.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native.errors import PolymorphicShapeError
from jax2tf_native.tf_args import ArgLeaf
from tf_ops import dtypes as tf_dtypes


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """The exported specification of one flat argument.

    Attributes:
      path: the argument path, e.g. "args[0]['w']".
      spec: the user's shape string for it, or None for a static shape.
      shape: the dimensions, ints or JAX symbolic dimension expressions.
      dtype: the numpy dtype.
    """
    path: str
    spec: str | None
    shape: tuple
    dtype: np.dtype

    @property
    def struct(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(self.shape, self.dtype)


def shape_spec(shape: Sequence) -> str:
    """The shape string `polymorphic_shapes` takes for a (possibly symbolic) shape.

    The one definition: `call_exported`'s argument specs and the SavedModel writer's
    signatures both describe exported shapes with it.

    Example:
        >>> b, = jax.export.symbolic_shape("b")
        >>> shape_spec((b, 28, 1))
        '(b, 28, 1)'
    """
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _is_poly_shape(x) -> bool:
    # jax2tf.PolyShape (deprecated in JAX, still public in jax2tf) is a tuple of dims whose
    # str() is the equivalent shape string; matched by name so that jax2tf is not imported.
    return isinstance(x, tuple) and type(x).__name__ == "PolyShape"


def _is_spec_leaf(x) -> bool:
    return x is None or isinstance(x, str) or _is_poly_shape(x)


def _as_spec_strings(polymorphic_shapes: Any) -> Any:
    """Replaces jax2tf.PolyShape leaves by their shape strings."""
    return jax.tree.map(lambda x: str(x) if _is_poly_shape(x) else x, polymorphic_shapes,
                        is_leaf=_is_spec_leaf)


def broadcast_specs(polymorphic_shapes: Any, args: tuple) -> list[str | None]:
    """One spec (None or string) per flat leaf of `args`, from a pytree prefix of `args`."""
    if polymorphic_shapes is None:
        return [None] * len(jax.tree_util.tree_leaves(args))
    if _is_poly_shape(polymorphic_shapes):
        polymorphic_shapes = str(polymorphic_shapes)
    if isinstance(polymorphic_shapes, list):
        # jax2tf users pass a list for the positional-args tuple; JAX accepts it too.
        polymorphic_shapes = tuple(polymorphic_shapes)
    polymorphic_shapes = _as_spec_strings(polymorphic_shapes)
    bad = [x for x in jax.tree_util.tree_leaves(polymorphic_shapes, is_leaf=_is_spec_leaf)
           if not _is_spec_leaf(x)]
    if bad:
        raise PolymorphicShapeError(
            f"polymorphic_shapes leaves must be None or shape strings like 'b, ...', got "
            f"{bad[0]!r} of type {type(bad[0]).__name__}. Fix: write the shape as a string, "
            f"e.g. '(b, 28, 28, 1)'.")
    try:
        # Each spec leaf becomes a _Specs group (not a list: lists in polymorphic_shapes are
        # pytree nodes, e.g. [(["v", "v"], ["v"])] for args (([x0, x1], [x2]),)).
        per_subtree = jax.tree.map(
            lambda spec, subtree: _Specs([spec] * len(jax.tree_util.tree_leaves(subtree))),
            polymorphic_shapes, args, is_leaf=_is_spec_leaf)
    except (ValueError, TypeError) as e:
        example = "[" + ", ".join(["'b, ...'"] * max(len(args), 1)) + "]"
        args_structure = jax.tree_util.tree_structure(args)
        spec_structure = jax.tree_util.tree_structure(polymorphic_shapes, is_leaf=_is_spec_leaf)
        raise PolymorphicShapeError(
            f"polymorphic_shapes does not match the positional arguments: it must be a single "
            f"string, or a pytree prefix of args with one entry per argument. Got "
            f"polymorphic_shapes structure {spec_structure} for args structure "
            f"{args_structure} ({len(args)} positional argument(s)). Detail: {e}. Fix: e.g. "
            f"polymorphic_shapes={example}.") from None
    return [spec for group in jax.tree_util.tree_leaves(
                per_subtree, is_leaf=lambda x: isinstance(x, _Specs))
            for spec in group.specs]


@dataclasses.dataclass(frozen=True)
class _Specs:
    """The specs of the flat leaves under one polymorphic_shapes leaf (a pytree leaf itself)."""
    specs: list


def make_scope(constraints: Sequence[str]) -> jax.export.SymbolicScope:
    """A symbolic scope holding the user's constraints, with a clear error if one is malformed."""
    if isinstance(constraints, str):
        constraints = (constraints,)
    try:
        return jax.export.SymbolicScope(tuple(constraints))
    except Exception as e:  # JAX raises ValueError or tokenize errors for bad syntax.
        raise PolymorphicShapeError(
            f"polymorphic_constraints {tuple(constraints)!r} is malformed: {e}. Fix: write each "
            f"constraint as 'expr >= expr', 'expr <= expr' or 'expr == expr', e.g. 'b >= 16'.") from None


def leaf_spec(path: str, spec: str | None, shape: Sequence[int | None], dtype,
              scope: jax.export.SymbolicScope) -> LeafSpec:
    """Parses one leaf's shape string against its actual shape."""
    shape = tuple(shape)
    if spec is None:
        unknown = [i for i, d in enumerate(shape) if d is None]
        if unknown:
            # jax2tf's phrase for this case (JAX parses a None spec against a None size).
            raise PolymorphicShapeError(
                f"syntax error in symbolic shape None for {path}: "
                f"{path} has dimension {unknown[0]} unknown while tracing (shape "
                f"{_fmt(shape)}), but polymorphic_shapes gives no symbolic dimension for it. "
                f"Fix: pass polymorphic_shapes with a dimension variable there, e.g. "
                f"'{_suggest(shape)}'.")
        return LeafSpec(path, None, shape, np.dtype(dtype))
    explicit, has_ellipsis = _spec_rank(spec)
    if explicit is not None and (explicit > len(shape) or
                                 (explicit < len(shape) and not has_ellipsis)):
        raise PolymorphicShapeError(
            f"polymorphic shape {spec!r} for {path} has {explicit} dimension(s), but {path} "
            f"has rank {len(shape)} (shape {_fmt(shape)}). Fix: give one entry per dimension "
            f"(use '...' for trailing known dimensions), e.g. '{_suggest(shape)}'.")
    try:
        dims = jax.export.symbolic_shape(spec, like=shape, scope=scope)
    except Exception as e:  # ValueError for most, tokenize.TokenError for unbalanced brackets.
        raise PolymorphicShapeError(
            f"polymorphic shape {spec!r} for {path} (actual shape {_fmt(shape)}) is invalid: "
            f"{_strip_jax_prefix(e)}. Fix: give one entry per dimension, using a constant "
            f"equal to the actual size, '_' for a known size, or a dimension variable, e.g. "
            f"'{_suggest(shape)}'.") from None
    if len(dims) != len(shape):
        raise PolymorphicShapeError(
            f"polymorphic shape {spec!r} for {path} has {len(dims)} dimension(s), but {path} "
            f"has rank {len(shape)} (shape {_fmt(shape)}). Fix: give one entry per dimension "
            f"(use '...' for trailing known dimensions), e.g. '{_suggest(shape)}'.")
    return LeafSpec(path, spec, tuple(dims), np.dtype(dtype))


def leaf_specs(leaves: Sequence[ArgLeaf], n_positional_leaves: int, polymorphic_shapes: Any,
               args: tuple, scope: jax.export.SymbolicScope) -> list[LeafSpec]:
    """Specs for all flat leaves; keyword arguments are static, as in jax2tf."""
    specs = broadcast_specs(polymorphic_shapes, args)
    specs += [None] * (len(leaves) - n_positional_leaves)
    return [leaf_spec(leaf.path, spec, leaf.shape, leaf.dtype, scope)
            for leaf, spec in zip(leaves, specs)]


def _spec_rank(spec: str) -> tuple[int | None, bool]:
    """(number of explicit dimensions, whether '...' is present) of a shape string.

    JAX's parser reports a spec longer than the shape as "tuple index out of range", so the rank
    is compared before parsing. None when the brackets do not balance (the parser explains).
    """
    body = spec.strip()
    if body.count("(") != body.count(")"):
        return None, False
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    parts, depth, current = [], 0, ""
    for ch in body:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    parts = [p for p in parts if p]
    has_ellipsis = "..." in parts
    return len(parts) - has_ellipsis, has_ellipsis


def _strip_jax_prefix(e: Exception) -> str:
    """JAX's message without its echo of the actual shape and parser state (ours says both);
    its leading "syntax error in symbolic shape ..." is kept: jax2tf users match on it."""
    return str(e).split("; like=")[0].split(". Parsed")[0]


def _fmt(shape) -> str:
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"


def _suggest(shape) -> str:
    if not shape:
        return "()"
    return "(" + ", ".join(["b"] + ["_"] * (len(shape) - 1)) + ")"


def input_signature(args: Sequence[Any], polymorphic_shapes: Any = None,
                    polymorphic_constraints: Sequence[str] = ()) -> list:
    """The `tf.TensorSpec` pytree for `tf.function(input_signature=...)`, None where symbolic.

    Args:
      args: example positional arguments (arrays, tensors or `jax.ShapeDtypeStruct`s).
      polymorphic_shapes: as for `convert`.
      polymorphic_constraints: as for `convert`.

    Returns:
      A list with one entry per positional argument, each a pytree of `tf.TensorSpec`.

    Example:
        >>> x = np.zeros((4, 28, 28, 1), np.float32)
        >>> input_signature([x], ["(b, 28, 28, 1)"])
        [TensorSpec(shape=(None, 28, 28, 1), dtype=tf.float32, name=None)]
    """
    args = tuple(args)
    scope = make_scope(polymorphic_constraints)
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(args)
    specs = broadcast_specs(polymorphic_shapes, args)
    tensor_specs = []
    for (key_path, leaf), spec in zip(leaves_with_path, specs):
        path = "args" + jax.tree_util.keystr(key_path)
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            leaf = np.asarray(leaf)
        dtype = tf_dtypes.to_numpy_dtype(tf.dtypes.as_dtype(leaf.dtype))
        shape = tuple(None if d is None else int(d) for d in leaf.shape)
        parsed = leaf_spec(path, spec, shape, dtype, scope)
        static = [d if isinstance(d, int) else None for d in parsed.shape]
        tensor_specs.append(tf.TensorSpec(static, tf_dtypes.to_tf_dtype(dtype)))
    return list(jax.tree_util.tree_unflatten(treedef, tensor_specs))
