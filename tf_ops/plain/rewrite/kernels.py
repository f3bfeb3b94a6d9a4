"""Special functions raised to TF's kernels: the ops JAX expanded one primitive into (`erfc`
as a polynomial with clamps and selects), and the CHLO composites it keeps (`chlo.erf`).

The ops one primitive was lowered to share its MLIR location, whose name ends with the
primitive's ("jit(f)/erfc"). A group is raised when it is closed: one data input (constants
aside) of the result's type, and no inner value used outside it. Composites name themselves
(`name = "chlo.erf"`). Both become one `raised.unary` op naming the TF kernel; only kernels
with a measured bound for the element type are used (`KERNELS`).
"""
from __future__ import annotations

import collections
import dataclasses
import functools

import jax
import numpy as np

from tf_ops.plain.program import Op, Program, Region, read_program
from tf_ops.plain.rewrite import graph

# JAX primitive (expanded in the module) -> TF kernel, and the element types its bound was
# measured for (tools/kernel_bounds.py; docs/exactness.md lists the bounds).
EXPANDED = {
    "erfc": ("Erfc", ("f16", "bf16", "f32")),
}
# The JAX function of each primitive: a group is raised only when its ops are those JAX
# lowers the primitive to (two applications at one source location share a location too).
_PRIMITIVES = {"erfc": jax.lax.erfc}
# Ops that only move shapes: static and symbolic shapes lower them differently.
_SHAPE_OPS = frozenset({"stablehlo.constant", "stablehlo.broadcast_in_dim",
                        "stablehlo.dynamic_broadcast_in_dim", "stablehlo.reshape",
                        "stablehlo.dynamic_reshape", "stablehlo.get_dimension_size",
                        "stablehlo.concatenate"})
_NUMPY_TYPES = {"f16": np.float16, "bf16": jax.numpy.bfloat16, "f32": np.float32,
                "f64": np.float64}
# CHLO composite name -> TF kernel, and the element types.
COMPOSITES = {
    "chlo.erf": ("Erf", ("f16", "bf16", "f32")),
}
RAISED_UNARY = "raised.unary"


def raise_kernels(program: Program) -> Program:
    return graph.map_regions(program, _raise_region)


def _raise_region(region: Region) -> Region:
    g = graph.RegionGraph.of(region)
    replacements, removed = {}, set()
    for i in range(len(region.ops) - 1, -1, -1):
        if i in removed or i in replacements:
            continue
        op = region.ops[i]
        raised = _composite(op) if op.name == "stablehlo.composite" else _group(g, i, removed)
        if raised is not None:
            replacements[i], group = raised
            removed |= group
    return graph.replace_ops(region, replacements, removed) if replacements else region


def _kernel_for(table: dict, key: str, op: Op) -> str | None:
    entry = table.get(key)
    if entry is None or len(op.result_types) != 1:
        return None
    kernel, elements = entry
    return kernel if op.result_types[0].element in elements else None


def _unary(op: Op, x: int, x_type, kernel: str, primitive: str) -> Op:
    return dataclasses.replace(op, name=RAISED_UNARY, operands=(x,), operand_types=(x_type,),
                               attrs={"kernel": kernel, "primitive": primitive}, regions=())


def _composite(op: Op):
    name = op.attr("name", "")
    kernel = _kernel_for(COMPOSITES, name, op)
    if kernel is None or len(op.operands) != 1 \
            or op.operand_types[0] != op.result_types[0]:
        return None
    return _unary(op, op.operands[0], op.operand_types[0], kernel, name), set()


def _group(g: graph.RegionGraph, root: int, taken: set):
    """The root op's group raised, as (the raised op, the indices of the group's other ops),
    or None when `root` is not the end of a closed group of an `EXPANDED` primitive."""
    op = g.region.ops[root]
    primitive = graph.primitive_of(op)
    kernel = _kernel_for(EXPANDED, primitive, op)
    if kernel is None:
        return None
    location = op.location
    if all(u is not None and g.region.ops[u].location == location
           for r in op.results for u in g.users.get(r, [])):
        return None  # not the group's last op
    members, inputs, stack = {root}, set(), [root]
    while stack:
        for v in g.region.ops[stack.pop()].operands:
            j = g.producer.get(v)
            if j is None or g.region.ops[j].location != location:
                if j is None or g.region.ops[j].name != "stablehlo.constant":
                    inputs.add(v)
                continue
            if j not in members:
                members.add(j)
                stack.append(j)
    if len(inputs) != 1 or members & taken or len(members) < 2:
        return None
    for j in members - {root}:  # closed: inner values feed only the group
        for r in g.region.ops[j].results:
            if any(u not in members for u in g.users.get(r, [])):
                return None
    (x,) = inputs
    x_type = _type_of(g, x)
    if x_type is None or x_type != op.result_types[0]:
        return None
    if _signature(g.region.ops[j] for j in members) != _expected(primitive, x_type.element):
        return None
    return _unary(op, x, x_type, kernel, primitive), members - {root}


def _signature(ops) -> dict:
    return dict(collections.Counter(op.name for op in ops if op.name not in _SHAPE_OPS))


@functools.lru_cache(maxsize=None)
def _expected(primitive: str, element: str) -> dict:
    """The ops (shape ops aside) JAX lowers `primitive` to for one element type."""
    dtype = _NUMPY_TYPES.get(element)
    if dtype is None:
        return {}
    if element == "f64" and not jax.config.jax_enable_x64:
        with jax.enable_x64(True):
            return _expected(primitive, element)
    exported = jax.export.export(jax.jit(_PRIMITIVES[primitive]))(
        jax.ShapeDtypeStruct((2,), dtype))
    program = read_program(exported.mlir_module())
    return _signature(program.functions[program.main].body.ops)


def _type_of(g: graph.RegionGraph, value):
    j = g.producer.get(value)
    if j is not None:
        op = g.region.ops[j]
        return op.result_types[op.results.index(value)]
    if value in g.region.args:
        return g.region.arg_types[g.region.args.index(value)]
    return None  # captured from an outer region: its type is not at hand here
