"""Shardings of converted functions: those a jitted function declares, and an export's.

A `jax.jit(f, in_shardings=..., out_shardings=...)` given to `convert` is exported inside a flat
function of its leaves; `declared` reads its shardings so that every module exported for it (the
function, its forward with residuals, its backward, its VJP) declares them on its own arguments
and results, as JAX's own lowering of `jax.vjp` does:

- forward: the function's input and output shardings; residuals unspecified (the partitioner
  chooses, as for JAX's residuals);
- backward and VJP: cotangent inputs take their outputs' shardings, the input cotangents take
  their inputs' shardings.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import jax

from jax2tf_native import _jax_internals, errors


@dataclasses.dataclass(frozen=True)
class FunctionShardings:
    """Declared shardings of a flat function (a `jax.sharding.Sharding`, or None: unspecified).

    Attributes:
      inputs: one per flat input.
      outputs: one per flat output.
    """
    inputs: tuple
    outputs: tuple

    def vjp(self, diff_in: Sequence[int], diff_out: Sequence[int]) -> "FunctionShardings":
        """Of `vjp(*xs, *cts_of_diff_out) -> cts_of_diff_in`."""
        return FunctionShardings(self.inputs + tuple(self.outputs[j] for j in diff_out),
                                 tuple(self.inputs[i] for i in diff_in))

    def backward(self, n_residuals: int, diff_in: Sequence[int],
                 diff_out: Sequence[int]) -> "FunctionShardings":
        """Of `bwd(*residuals, *cts_of_diff_out) -> cts_of_diff_in`; residuals unspecified."""
        return FunctionShardings((None,) * n_residuals + tuple(self.outputs[j] for j in diff_out),
                                 tuple(self.inputs[i] for i in diff_in))


def declared(fun: Callable, in_tree, in_structs: Sequence[Any]) -> FunctionShardings | None:
    """The shardings `fun` declares, when it is a `jax.jit` with in/out shardings; else None.

    Functions without declared shardings (unjitted functions, `jax.jit` without shardings,
    `shard_map`) export as they are: their constraints are inside the module.

    Example:
        >>> from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        >>> mesh = Mesh(jax.devices()[:1], ("x",))
        >>> jf = jax.jit(lambda x: x * 2, in_shardings=NamedSharding(mesh, P("x")))
        >>> x = jax.ShapeDtypeStruct((8,), "float32")
        >>> treedef = jax.tree_util.tree_structure(((x,), {}))
        >>> declared(jf, treedef, [x]).inputs[0].spec
        P('x',)
        >>> declared(lambda x: x * 2, treedef, [x]) is None
        True
    """
    if not hasattr(fun, "trace"):
        return None
    args, kwargs = jax.tree_util.tree_unflatten(in_tree, list(in_structs))
    traced = fun.trace(*args, **kwargs)
    if not isinstance(traced, jax.stages.Traced):
        # Another library's jit (e.g. flax.nnx.jit) restructures the arguments, so its
        # shardings do not line up with our leaves: it is exported as called, and its
        # shardings stay inside the module as constraints.
        return None
    ins, outs = _jax_internals.jit_declared_shardings(traced)
    if len(ins) != len(in_structs) or all(s is None for s in ins + outs):
        return None
    return FunctionShardings(ins, outs)


def body(fun: Callable, declared_shardings: FunctionShardings | None) -> Callable:
    """The function to export inside our flat jit: the jitted function's own body when its
    shardings are declared there (repeated on the outer jit), else `fun` itself.

    A nested jit would turn the declared shardings into constraints inside a private function,
    where TF's shape refinement leaves polymorphic dimensions dynamic, and JAX's own lowering of
    the function has them on its parameters and results instead.
    """
    if declared_shardings is None:
        return fun
    return getattr(fun, "__wrapped__", fun)


def exported_hlo_shardings(exported: jax.export.Exported) -> tuple[tuple, tuple]:
    """(inputs, outputs): the `HloSharding` (or None) of each flat input and output.

    Single-device modules have none worth marking.
    """
    n_in, n_out = len(exported.in_avals), len(exported.out_avals)
    if exported.nr_devices == 1:
        return (None,) * n_in, (None,) * n_out
    if any(s is not None for s in exported.in_shardings_hlo + exported.out_shardings_hlo):
        return tuple(exported.in_shardings_hlo), tuple(exported.out_shardings_hlo)  # old exports

    def hlo(shardings, avals):
        return tuple(None if s is None else _jax_internals.named_sharding_to_hlo(s, a.ndim)
                     for s, a in zip(shardings, avals))

    return (hlo(exported.in_shardings_jax(None), exported.in_avals),
            hlo(exported.out_shardings_jax(None), exported.out_avals))


# JAX's IndivisibleError (private type, matched by its message): a sharding splits a dimension
# whose symbolic size JAX cannot prove divisible by the number of shards, e.g. "b" over 8.
_INDIVISIBLE = re.compile(r"implies that array axis (\d+) is partitioned (\d+) times, but the "
                          r"dimension size is (.+?) \(full shape: \((.*?)\)")


def indivisible_dimension_error(error: ValueError, specs) -> errors.PolymorphicShapeError | None:
    """Our error for a sharded dimension whose polymorphic size may not divide by its shards,
    naming the argument (when the shape is an input's), the dimension and the fix; None for
    any other error."""
    found = _INDIVISIBLE.search(str(error))
    if found is None:
        return None
    axis, shards, size, shape = found.groups()
    paths = [s.path for s in specs if ", ".join(map(str, s.shape)) == shape.rstrip(",")]
    where = (f"{paths[0]} (shape ({shape}))" if len(paths) == 1
             else f"an array of shape ({shape}) (an input or output of the function)")
    return errors.PolymorphicShapeError(
        f"{where}: dimension {axis} is sharded {shards} ways, but its polymorphic size {size} "
        f"need not be a multiple of {shards}. Fix: write that dimension as a multiple of the "
        f"shards in polymorphic_shapes, e.g. '{shards}*{size}' for '{size}' (every call's size "
        f"must then divide by {shards}), or do not shard it.")
