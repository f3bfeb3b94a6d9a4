"""The plans a gradient node hands to `gradients.call`: data only, so that `gradients` reads
top to bottom and never calls back into a node.

Both nodes make them: `function_node.DifferentiableFunction` (`convert`) and
`exported_node.ExportedFunction` (`call_exported`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from jax2tf_native.prepared_export import PreparedExport


@dataclasses.dataclass(frozen=True)
class ForwardPlan:
    """What one call's forward op runs, as `gradients.call` needs it (data only).

    Attributes:
      node: the node whose gradient a recording tape gets: the called node, or its variant
        for the watched inputs (`for_inputs`).
      prepared: the module the forward op runs.
      n_outputs: how many of its results are the function's outputs (the rest are residuals).
      residual_sources: per residual, ("input", i) for input i or ("output", j) for the j-th
        result after the outputs; None: no residuals (gradients recompute).
      diff_out: the outputs that take a cotangent; the others get a None gradient.
    """
    node: Any
    prepared: PreparedExport
    n_outputs: int
    residual_sources: tuple[tuple[str, int], ...] | None
    diff_out: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class BackwardPlan:
    """What a node's gradient runs, as `gradients.call` needs it (data only).

    Attributes:
      vjp: the VJP's node, `vjp(*xs, *cts) -> in_cts`, itself differentiable.
      backward: the backward from residuals, `bwd(*residuals, *cts) -> in_cts`; None when the
        residuals' shapes cannot be solved or none were asked for (gradients recompute).
      diff_in, diff_out: the inputs and outputs that take a cotangent.
      every_array: the VJP takes one cotangent per output (float0, i.e. bool zeros, for integer
        outputs) and returns one per input, as jax.export's do; False: ours, for `diff_out`
        and `diff_in` only.
    """
    vjp: Any
    backward: PreparedExport | None
    diff_in: tuple[int, ...]
    diff_out: tuple[int, ...]
    every_array: bool = False
