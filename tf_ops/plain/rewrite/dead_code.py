"""Removes ops whose results nothing uses (constants and shape ops left behind by the other
passes). Ops with effects or regions stay: custom calls, calls, loops and conditionals."""
from __future__ import annotations

from tf_ops.plain.program import Program, Region
from tf_ops.plain.rewrite import graph

_KEPT = frozenset({"stablehlo.custom_call", "func.call", "stablehlo.while", "stablehlo.case",
                   "stablehlo.if", "stablehlo.optimization_barrier"})


def remove(program: Program) -> Program:
    return graph.map_regions(program, _remove_region)


def _remove_region(region: Region) -> Region:
    while True:
        g = graph.RegionGraph.of(region)
        dead = {i for i, op in enumerate(region.ops)
                if op.name not in _KEPT and op.results
                and not any(g.users.get(r) for r in op.results)}
        if not dead:
            return region
        region = graph.replace_ops(region, {}, dead)
