"""A flat JAX function and the exports that TF calls for its value and its gradients.

The node `convert` hands to `gradients.call` (`exported_node.ExportedFunction` is the one
for `call_exported`, with the same interface). `DifferentiableFunction` exports lazily, once
each, and keeps:
- `primal`: `f(*xs) -> outs` (used without gradients, in recompute mode, or as a fallback);
- `forward`: `fwd(*xs) -> outs + residuals` (residual mode);
- `backward`: `bwd(*residuals, *cts) -> in_cts` (residual mode, first order);
- `vjp_function`: the child `DifferentiableFunction` of `vjp(*xs, *cts) -> in_cts`, used in
  recompute mode and as the derivative of the backward pass (second order and up);
- `for_inputs`: a variant whose gradients cover fewer inputs (those a tape watches), sharing the
  primal export: its residual forward keeps only what their cotangents need.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Sequence

from jax2tf_native import exporting, vjp_functions
from jax2tf_native.arg_specs import LeafSpec
from jax2tf_native.errors import GradientSpecError, SymbolicCallTfFound, first_line
from jax2tf_native.flat_function import FlatFunction
from jax2tf_native.gradient_plans import BackwardPlan, ForwardPlan
from jax2tf_native.prepared_export import PreparedExport
from jax2tf_native.shardings import FunctionShardings
from jax2tf_native.vjp_functions import ResidualForward

logger = logging.getLogger("jax2tf_native")

GRADIENT_MODES = ("residuals", "recompute")


def check_gradient_mode(mode: str) -> str:
    if mode not in GRADIENT_MODES:
        raise ValueError(f"gradient_mode must be one of {GRADIENT_MODES}, got {mode!r}. "
                         f"'residuals' (default) keeps the forward residuals for the backward "
                         f"pass; 'recompute' recomputes the forward pass as jax2tf does.")
    return mode


@dataclasses.dataclass(frozen=True)
class ResidualExports:
    """The forward-with-residuals export and how to split its outputs."""
    prepared: PreparedExport
    structure: ResidualForward

    @property
    def n_outputs(self) -> int:
        return self.structure.n_outputs


class DifferentiableFunction:
    """A flat JAX function with its argument specs, export options and lazy exports."""

    def __init__(self, flat: FlatFunction, specs: Sequence[LeafSpec],
                 options: exporting.ExportOptions, mode: str, constraints: Sequence[str] = (),
                 residual_policy=None, shardings: FunctionShardings | None = None,
                 parent: "DifferentiableFunction | None" = None):
        self.flat = flat
        self.specs = tuple(specs)
        self.options = options
        self.mode = check_gradient_mode(mode)
        self.residual_policy = residual_policy
        self.constraints = tuple(constraints)
        self.shardings = shardings  # declared by a sharded jax.jit; None: none declared
        self._lock = threading.RLock()
        self._primal: PreparedExport | None = None
        self._forward: ResidualExports | None | bool = False   # False: not tried yet
        self._backward: PreparedExport | None | bool = False
        self._vjp: DifferentiableFunction | None = None
        self._diff_out: tuple[int, ...] | None = None
        self._parent = parent  # the function whose primal export this variant shares
        self._variants: dict[tuple[int, ...], DifferentiableFunction] = {}
        self.out_avals: tuple | None = None
        self.name = flat.name
        self.diff_in = flat.diff_in  # the inputs that take a cotangent

    @property
    def plain(self) -> bool:
        """Whether its modules run as ordinary TF ops (`enable_xla=False`)."""
        return self.options.plain

    def _export(self, fun, name: str, specs: Sequence[LeafSpec],
                shardings: FunctionShardings | None = None) -> PreparedExport:
        fun.__name__ = name
        return exporting.export_prepared(fun, specs, self.options, constraints=self.constraints,
                                         shardings=shardings)

    def primal(self) -> PreparedExport:
        with self._lock:
            if self._primal is None:
                if self._parent is not None:
                    prepared = self._parent.primal()
                    self.flat.out_tree = self._parent.flat.out_tree
                else:
                    prepared = self._export(self.flat.fun, self.flat.name, self.specs,
                                            self.shardings)
                out_avals = tuple(prepared.exported.out_avals)
                # A bad gradient_outputs fails at the first call, with or without a tape.
                self._diff_out = self.flat.diff_out([a.dtype for a in out_avals])
                self._primal, self.out_avals = prepared, out_avals
            return self._primal

    def forward_plan(self, watched: tuple[int, ...]) -> ForwardPlan:
        """What the forward op runs when tapes watch the inputs `watched` (a subset of
        `diff_in`; empty: none watches, gradients if any recompute).

        In residual mode with watched inputs: the residual forward of `for_inputs(watched)`;
        otherwise (or when it cannot be exported) the primal module.
        """
        node = self.for_inputs(watched) if watched else self
        forward = node.forward() if watched and self.mode == "residuals" else None
        if forward is None:
            prepared = node.primal()
            return ForwardPlan(node, prepared, len(node.out_avals), None, node.diff_out())
        return ForwardPlan(node, forward.prepared, forward.n_outputs,
                           forward.structure.residual_sources, node.diff_out())

    def backward_plan(self, with_residuals: bool) -> BackwardPlan:
        """The gradient's exports: the VJP node, and the backward from residuals when
        `with_residuals` (exported on first use)."""
        return BackwardPlan(self.vjp_function(), self.backward() if with_residuals else None,
                            self.diff_in, self.diff_out())

    def for_inputs(self, diff_in: tuple[int, ...]) -> "DifferentiableFunction":
        """This function with gradients for the inputs `diff_in` only (a subset of `diff_in`).

        The variant shares the primal export; its residual forward, backward and VJP compute
        only what those inputs' cotangents need. Cached per subset.
        """
        if diff_in == self.flat.diff_in:
            return self
        with self._lock:
            variant = self._variants.get(diff_in)
            if variant is None:
                variant = DifferentiableFunction(
                    self.flat.with_gradient_inputs(diff_in), self.specs, self.options,
                    self.mode, self.constraints, self.residual_policy,
                    shardings=self.shardings, parent=self)
                self._variants[diff_in] = variant
            return variant

    def forward(self) -> ResidualExports | None:
        """The residual forward, or None (logged) when it cannot be exported for TF."""
        with self._lock:
            if self._forward is False:
                structure = vjp_functions.residual_forward(self.flat, self.residual_policy)
                try:
                    prepared = self._export(structure.fwd, f"{self.flat.name}_fwd", self.specs,
                                            self.shardings)
                except (GradientSpecError, SymbolicCallTfFound):
                    raise  # gradient_outputs or residual_policy is wrong: no fallback helps;
                    # or convert splits the function at its call_tf
                except Exception as e:  # any other failure means: fall back to the primal forward
                    if self.residual_policy is not None:
                        self._check_policy_is_not_the_cause(e)
                    logger.info("jax2tf_native: %s: no residual forward (%s: %s); using the "
                                "primal forward and recomputing for gradients",
                                self.flat.name, type(e).__name__, first_line(e)[:200])
                    self._forward = None
                else:
                    self._forward = ResidualExports(prepared, structure)
                    self.out_avals = tuple(prepared.exported.out_avals[:structure.n_outputs])
            return self._forward

    def _check_policy_is_not_the_cause(self, error: Exception) -> None:
        """Raises if the residual forward exports without `residual_policy` but not with it."""
        try:
            self._export(vjp_functions.residual_forward(self.flat).fwd,
                         f"{self.flat.name}_fwd", self.specs, self.shardings)
        except Exception:
            return  # it fails without the policy too: the usual fallback applies
        raise GradientSpecError(
            f"residual_policy={self.residual_policy!r} fails on {self.flat.name}: "
            f"{type(error).__name__}: {first_line(error)[:300]} Fix: pass a "
            f"jax.checkpoint_policies value, e.g. jax.checkpoint_policies.dots_saveable "
            f"(factories such as save_only_these_names must be called with the names first)."
        ) from error

    def backward(self) -> PreparedExport | None:
        """The backward from residuals, or None (logged) when residual shapes can't be solved."""
        with self._lock:
            if self._backward is False:
                forward = self.forward()
                assert forward is not None
                computed_avals = forward.prepared.exported.out_avals[forward.n_outputs:]
                res_avals = forward.structure.residuals(self.flat.in_avals, computed_avals)
                specs = ([_spec(f"residual[{i}]", a) for i, a in enumerate(res_avals)]
                         + self._cotangent_specs(forward.structure.diff_out))
                shardings = (None if self.shardings is None else self.shardings.backward(
                    len(res_avals), self.flat.diff_in, forward.structure.diff_out))
                try:
                    self._backward = self._export(
                        vjp_functions.backward_from_residuals(forward.structure),
                        f"{self.flat.name}_bwd", specs, shardings)
                except SymbolicCallTfFound:
                    raise  # convert splits the function at its call_tf
                except Exception as e:
                    logger.info("jax2tf_native: %s: backward from residuals not exportable "
                                "(%s: %s); recomputing the forward pass for gradients",
                                self.flat.name, type(e).__name__, first_line(e)[:200])
                    self._backward = None
            return self._backward

    def diff_out(self) -> tuple[int, ...]:
        """Indices of the outputs that take a cotangent; fixed once the first export is made.

        Computed once: every call of the converted function asks (gradients.call).
        """
        with self._lock:
            if self._diff_out is None:
                if self.out_avals is None:  # neither export made yet: the cheaper one
                    self.primal()
                self._diff_out = self.flat.diff_out([a.dtype for a in self.out_avals])
            return self._diff_out

    def _cotangent_specs(self, diff_out: Sequence[int]) -> list[LeafSpec]:
        return [_spec(f"cotangent[{j}]", self.out_avals[j]) for j in diff_out]

    def vjp_function(self) -> "DifferentiableFunction":
        """The child function `vjp(*xs, *cts) -> in_cts`, itself differentiable."""
        with self._lock:
            if self._vjp is None:
                diff_out = self.diff_out()
                n = len(self.specs)
                in_specs = ([dataclasses.replace(s, path=f"primal[{i}]")
                             for i, s in enumerate(self.specs)]
                            + self._cotangent_specs(diff_out))
                # Every float input of the VJP takes a gradient, also those left out of the
                # first order: d/dw of a gradient w.r.t. x is a gradient penalty's weight
                # gradient, as jax.grad(jax.grad(f, argnums=1)) computes it.
                flat = FlatFunction(fun=vjp_functions.recompute_vjp(self.flat, n),
                                    in_avals=tuple(s.struct for s in in_specs),
                                    name=f"{self.flat.name}_vjp")
                self._vjp = DifferentiableFunction(
                    flat, in_specs, self.options, self.mode, residual_policy=self.residual_policy,
                    shardings=(None if self.shardings is None
                               else self.shardings.vjp(self.flat.diff_in, diff_out)))
            return self._vjp


def _spec(path: str, aval) -> LeafSpec:
    return LeafSpec(path, None, tuple(aval.shape), aval.dtype)
