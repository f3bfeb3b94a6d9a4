"""Common subexpressions merged: an op identical to an earlier one in the same region (same
name, operands, attributes and result types, no regions, no effects) is dropped and its
results read from the earlier op's. JAX's modules repeat what the user's code repeats
(`x - mean` twice in a layer norm, one constant per use); a TF graph gets each value once."""
from __future__ import annotations

import dataclasses

import numpy as np

from tf_ops.plain.program import Op, Program, Region
from tf_ops.plain.rewrite import graph

_EFFECTS = frozenset({"stablehlo.custom_call", "func.call", "stablehlo.rng",
                      "stablehlo.rng_bit_generator", "stablehlo.optimization_barrier"})


def merge(program: Program) -> Program:
    return graph.map_regions(program, _merge_region)


def _key(op: Op):
    if op.regions or op.name in _EFFECTS or not op.results:
        return None
    return (op.name, op.operands, op.result_types, _frozen(op.attrs))


def _frozen(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return (value.dtype.str, value.tobytes())
    return value


def _merge_region(region: Region) -> Region:
    seen: dict = {}
    renamed: dict = {}
    ops = []
    for op in region.ops:
        if renamed and any(v in renamed for v in op.operands):
            op = dataclasses.replace(op, operands=tuple(renamed.get(v, v) for v in op.operands))
        if op.regions and renamed:
            op = dataclasses.replace(op, regions=tuple(_renamed(r, renamed) for r in op.regions))
        key = _key(op)
        if key is not None and key in seen:
            renamed.update(zip(op.results, seen[key].results))
            continue
        if key is not None:
            seen[key] = op
        ops.append(op)
    if not renamed:
        return region
    returns = tuple(renamed.get(v, v) for v in region.returns)
    return dataclasses.replace(region, ops=tuple(ops), returns=returns)


def _renamed(region: Region, renamed: dict) -> Region:
    """A nested region reading merged values from around it under their kept names."""
    ops = []
    for op in region.ops:
        op = dataclasses.replace(op, operands=tuple(renamed.get(v, v) for v in op.operands),
                                 regions=tuple(_renamed(r, renamed) for r in op.regions))
        ops.append(op)
    return dataclasses.replace(region, ops=tuple(ops),
                               returns=tuple(renamed.get(v, v) for v in region.returns))
