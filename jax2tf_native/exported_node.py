"""A `jax.export.Exported` as a node of the gradient mechanism (`gradients.call`).

`call_exported` has no Python function to export a residual forward from, so its node is the
recompute mode of `function_node.DifferentiableFunction`, with the same interface
(`primal`, `forward_plan`, `backward_plan`, `diff_in`, `name`) over the artifact's own exports:
the module as the primal, and `Exported.vjp()` (present when serialized with `vjp_order >= 1`)
as the VJP, itself such a node for the next order. jax.export's VJPs take one cotangent per
output (float0 for integer outputs) and return one per input (`BackwardPlan.every_array`).
"""
from __future__ import annotations

import threading

import jax

from jax2tf_native import exporting, arg_specs, tf_args, prepared_export
from jax2tf_native.gradient_plans import BackwardPlan, ForwardPlan
from jax2tf_native.flat_function import is_differentiable


def leaf_specs(exported: jax.export.Exported) -> list[arg_specs.LeafSpec]:
    """The spec of each flat input of `exported` (path, shape string, dims, dtype).

    Example:
        >>> import numpy as np
        >>> exp = jax.export.export(jax.jit(lambda x: x))(np.zeros((2, 3), np.float32))
        >>> [(s.path, s.spec) for s in leaf_specs(exp)]
        [('args[0]', '(2, 3)')]
    """
    tree = jax.tree_util.tree_unflatten(exported.in_tree, exported.in_avals)
    specs = []
    for key_path, aval in jax.tree_util.tree_flatten_with_path(tree)[0]:
        root = "args" if key_path[0].idx == 0 else "kwargs"
        specs.append(arg_specs.LeafSpec(tf_args.path_str(root, key_path[1:]),
                                         arg_specs.shape_spec(aval.shape), tuple(aval.shape),
                                         aval.dtype))
    return specs


class ExportedFunction:
    """An artifact with its TF-ready module and, on first use, its VJP's node.

    Args:
      exported: the artifact, already for the target TF (`exporting.exported_for_target`).
      prepared: its module prepared for TF (`prepared_export.prepare`).
      stablehlo_version: the StableHLO version its VJPs are written in.
      target: the `tf_ops.tf_targets.TfTarget` its VJPs must run on (None: the installed TF).
      plain: its VJPs run as ordinary TF ops too (`enable_xla=False`), as `prepared` does.
    """

    def __init__(self, exported: jax.export.Exported, prepared: prepared_export.PreparedExport,
                 stablehlo_version: str | None, target=None, plain: bool = False):
        self.exported = exported
        self.name = exported.fun_name
        self.diff_in = tuple(i for i, a in enumerate(exported.in_avals)
                             if is_differentiable(a.dtype))
        self._diff_out = tuple(j for j, a in enumerate(exported.out_avals)
                               if is_differentiable(a.dtype))
        self._prepared = prepared
        self.specs, self.constraints = prepared.leaf_specs, prepared.constraints
        self._stablehlo_version = stablehlo_version
        self._target = target
        self.plain = plain
        self._lock = threading.Lock()
        self._vjp: ExportedFunction | None = None

    def primal(self) -> prepared_export.PreparedExport:
        """The artifact's own module, prepared for TF (what runs when no tape records)."""
        return self._prepared

    def forward_plan(self, watched: tuple[int, ...]) -> ForwardPlan:
        """The module itself, whatever the tapes watch: an artifact has no residual forward,
        and its VJP computes every input's cotangent."""
        return ForwardPlan(self, self._prepared, len(self.exported.out_avals), None,
                           self._diff_out)

    def backward_plan(self, with_residuals: bool) -> BackwardPlan:
        """The artifact's VJP (`Exported.vjp()`), prepared for TF on first use.

        Raises:
          NotImplementedError: the artifact was serialized without a VJP.
        """
        return BackwardPlan(self._vjp_function(), None, self.diff_in, self._diff_out,
                            every_array=True)

    def _vjp_function(self) -> "ExportedFunction":
        with self._lock:
            if self._vjp is None:
                if not self.exported.has_vjp():
                    raise NotImplementedError(
                        f"'{self.name}' carries no VJP, so TF cannot differentiate it. Fix: "
                        f"serialize it with Exported.serialize(vjp_order=1) (or higher for "
                        f"higher-order gradients).")
                vjp = exporting.exported_for_target(self.exported.vjp(), self._target)
                prepared = prepared_export.prepare(vjp, leaf_specs(vjp),
                                             stablehlo_version=self._stablehlo_version,
                                             target=self._target, plain=self.plain)
                self._vjp = ExportedFunction(vjp, prepared, self._stablehlo_version,
                                             self._target, plain=self.plain)
            return self._vjp
