"""Runs a prepared export on flat TF arguments: dtype and shape checks, then the XlaCallModule.

Shared by `convert` and `call_exported`, so both give the same checks and errors: `prepare`
(an `Exported` made ready for TF), `CheckedSignatures` (the checks, and the eager shortcut that
skips them after a cast-free call), `call_flat` (the op, via `tf_ops.xla_call_module`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native import _jax_internals, arg_shape_check, export_cache, shardings
from jax2tf_native.errors import (ArgumentTypeError, ExportedModuleError,
                                   ModuleNotRunnableHereError)
from jax2tf_native.arg_specs import LeafSpec
from jax2tf_native.tf_args import ArgLeaf
from tf_ops import arguments as tf_arguments
from tf_ops import custom_call_check
from tf_ops import dtypes as tf_dtypes
from tf_ops import tf_targets
from tf_ops import xla_call_module


@dataclasses.dataclass(frozen=True)
class PreparedExport:
    """An `Exported` with everything TF needs to call it.

    Attributes:
      exported: the `jax.export.Exported`.
      tf_module: the module re-serialized for TF, with the op's attributes.
      leaf_specs: the spec of each flat input (path, user string, dims, dtype), for checks.
      constraints: the user's `polymorphic_constraints`, checked at call time too.
    """
    exported: jax.export.Exported
    tf_module: xla_call_module.TfModule
    leaf_specs: tuple[LeafSpec, ...]
    constraints: tuple[str, ...] = ()

    @property
    def plain(self) -> bool:
        """Whether the module runs as ordinary TF ops (`enable_xla=False`), not XlaCallModule."""
        return self.tf_module.plain is not None


def prepare(exported: jax.export.Exported, leaf_specs: Sequence[LeafSpec], *,
            constraints: Sequence[str] = (), stablehlo_version: str | None = None,
            checks=(), tf_functions: Sequence = (), target=None,
            written_here: bool = False, plain: bool = False) -> PreparedExport:
    """Re-serializes `exported` for TF (for `target`, a `tf_ops.tf_targets.TfTarget`, when given)
    and bundles it with the argument specs.

    `tf_functions` are the TF concrete functions the module calls (jax2tf.call_tf with
    call_tf_graph=True), in the order of their indices in the module. `written_here`: the module
    bytes come from `jax.export` in this process (not from an artifact read from elsewhere).
    `plain`: the module runs as ordinary TF ops (`enable_xla=False`); an op that cannot be
    lowered exactly raises `tf_ops.plain.PlainLoweringError` here.
    """
    in_shardings, out_shardings = shardings.exported_hlo_shardings(exported)
    try:
        tf_module = xla_call_module.tf_module_from_exported(
            exported, stablehlo_version=stablehlo_version, checks=checks,
            tf_functions=tf_functions, in_shardings=in_shardings, out_shardings=out_shardings,
            target=target, written_here=written_here, plain=plain)
    except (custom_call_check.CustomCallNotAllowedError, tf_targets.TargetTfError):
        raise  # Already name the target or op, its source and the fix; keep their type.
    except ValueError as e:
        raise ExportedModuleError(str(e)) from None
    return PreparedExport(exported, tf_module, tuple(leaf_specs), tuple(constraints))


def _cast_for_x64(leaf: ArgLeaf, want: np.dtype) -> tf.Tensor:
    """Casts 64-bit inputs to the 32-bit type JAX exported them as when x64 is off (as jax2tf)."""
    if leaf.dtype == want:
        return leaf.value
    if want == jax.dtypes.float0 and leaf.dtype == np.bool_:
        return leaf.value  # float0 cotangents travel as bool (tf_ops.dtypes.to_tf_dtype)
    if (not jax.config.jax_enable_x64
            and jax.dtypes.canonicalize_dtype(leaf.dtype) == want):
        return tf_arguments.cast(leaf.value, want)
    raise ArgumentTypeError(
        f"{leaf.path} has dtype {leaf.dtype}, but the function was converted for {want}. Fix: "
        f"pass {want} (e.g. tf.cast(x, tf.{tf_dtypes.to_tf_dtype(want).name})), or convert "
        f"again for {leaf.dtype}.")


def check_args(specs: Sequence[LeafSpec], leaves: Sequence[ArgLeaf],
               constraints: Sequence[str] = (), graph_asserts: bool = True
               ) -> tuple[list, list]:
    """Checks count, dtypes and shapes; returns (tensors to pass, TF assert ops).

    With `graph_asserts=False` what is known now (static shapes, eager calls) is checked and
    nothing is added to the graph: plain graphs (`enable_xla=False`) carry no `Assert` op, which
    TF.js's converters and Core ML refuse."""
    if len(leaves) != len(specs):
        raise ArgumentTypeError(
            f"The call has {len(leaves)} array argument(s), but the function was converted for "
            f"{len(specs)}: {[s.path for s in specs]}. Fix: pass arguments with the same pytree "
            f"structure as at conversion.")
    values = [_cast_for_x64(leaf, spec.dtype) for leaf, spec in zip(leaves, specs)]
    # Without graph asserts, sizes unknown now stay None: no op reads them.
    shapes = tf_arguments.shapes([leaf.value for leaf in leaves],
                                 [leaf.shape for leaf in leaves]) if graph_asserts \
        else [list(leaf.shape) for leaf in leaves]
    asserts = arg_shape_check.solve_and_check(specs, shapes, constraints, graph_asserts=graph_asserts)
    return values, asserts


class CheckedSignatures:
    """The eager shortcut shared by `convert` and `call_exported` (its one definition): after
    an eager call whose arguments needed no cast, a later eager call with the same key (its
    TF-side signature) skips the checks and takes the node remembered for it. Graph calls
    always check: their asserts are ops of the graph.

    Example:
        >>> import numpy as np
        >>> from jax2tf_native.tf_args import flatten_args
        >>> from jax2tf_native.arg_specs import LeafSpec
        >>> class Node:
        ...     specs = (LeafSpec("args[0]", None, (2,), np.dtype("float32")),)
        ...     constraints = ()
        >>> checked = CheckedSignatures(8)
        >>> leaves, _ = flatten_args((tf.ones(2),), {})
        >>> key = ((2,), np.dtype("float32"))
        >>> checked.node(key) is None
        True
        >>> values, asserts = checked.check(key, leaves, Node)
        >>> checked.node(key) is Node
        True
    """

    def __init__(self, size: int):
        self.cache = export_cache.LruCache(size)

    def node(self, key) -> Any | None:
        """The node of an earlier cast-free eager call with `key`; None in graphs or if none."""
        return self.cache.get(key) if tf.executing_eagerly() else None

    def check(self, key, leaves: Sequence[ArgLeaf], node) -> tuple[list, list]:
        """`check_args` against `node.specs` and `node.constraints`; remembers `node` for `key`
        when the call is eager and needed no cast."""
        values, asserts = check_args(node.specs, leaves, node.constraints,
                                     graph_asserts=not getattr(node, "plain", False))
        if tf.executing_eagerly() and all(l.dtype == s.dtype
                                          for l, s in zip(leaves, node.specs)):
            self.cache.put(key, node)
        return values, asserts


def call_flat(prepared: PreparedExport, values: Sequence[tf.Tensor],
              asserts: Sequence = ()) -> list[tf.Tensor]:
    """Calls the module on already-checked flat tensors, after any run-time shape asserts.

    Raises:
      ModuleNotRunnableHereError: eagerly, when this host cannot run the module (exported for
        platforms or devices it lacks); in a graph the same message comes from a guard op.
    """
    problem = prepared.tf_module.problem_here
    if problem and tf.executing_eagerly():
        raise ModuleNotRunnableHereError(problem)
    outputs = xla_call_module.call(prepared.tf_module, values, after=asserts)
    if not tf.executing_eagerly():
        _set_static_output_shapes(prepared.exported, values, outputs)
    return outputs


def _set_static_output_shapes(exported: jax.export.Exported, values: Sequence[tf.Tensor],
                              outputs: Sequence[tf.Tensor]) -> None:
    """Gives graph outputs the static sizes their symbolic dimensions have at these inputs.

    TF's XlaCallModule reports an output dimension the module computes from a dimension
    variable as unknown, even when the graph knows the input sizes (a static batch): the
    downstream ops then see `None`. A variable that is a whole input dimension with a static
    size fixes every output dimension written in it (the module checks the same at run time).
    """
    known: dict[str, int] = {}
    for aval, value in zip(exported.in_avals, values):
        for want, got in zip(aval.shape, value.shape):
            if (not isinstance(want, int) and got is not None
                    and _jax_internals.dimension_variables(want) == {str(want)}):
                known[str(want)] = int(got)
    if not known or len(outputs) != len(exported.out_avals):
        return
    for aval, output in zip(exported.out_avals, outputs):
        if all(isinstance(d, int) for d in aval.shape):
            continue
        dims = [d if isinstance(d, int) else
                _jax_internals.evaluate_dimension(d, known)
                if _jax_internals.dimension_variables(d) <= known.keys() else None
                for d in aval.shape]
        try:
            output.set_shape(dims)
        except ValueError:
            pass  # a contradiction is the module's run-time check to report, not the trace's
