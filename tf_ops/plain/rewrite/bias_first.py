"""A dense layer's bias written before its product where exact GELU follows.

tensorflowjs's converters (its SavedModel converter and `convert_jax`, default options) run
Grappler's remapper, which fuses MatMul + BiasAdd + the erf GELU into one `_FusedMatMul` with
`fused_ops = [BiasAdd, GeluExact]`, which TF.js 4.22 cannot run ("Activation geluexact has not
been implemented for the CPU backend"). The converter's `normalize_bias_add` first turns
`AddV2(product, bias)` into a BiasAdd, but not `AddV2(bias, product)`; so with the bias first
the remapper leaves the layer as MatMul, AddV2 and the GELU's ops, which TF.js runs. TFLite
still makes FULLY_CONNECTED + GELU of either order, and the sum is the same value (addition
commutes, NaN and signed zeros included). Measured with tensorflowjs 4.22 and TF 2.21
(tests/consumers/test_tfjs_converters.py).
"""
from __future__ import annotations

import dataclasses

from tf_ops.plain.program import Program, Region
from tf_ops.plain.rewrite import graph


def order(program: Program) -> Program:
    """`program` with each `add(dot_general, bias)` whose result feeds `raised.gelu` written
    `add(bias, dot_general)`."""
    return graph.map_regions(program, _order_region)


def _order_region(region: Region) -> Region:
    g = graph.RegionGraph.of(region)
    swapped = {}
    for op in region.ops:
        if op.name != "raised.gelu":
            continue
        i = g.producer.get(op.operands[0])
        add = region.ops[i] if i is not None else None
        if add is None or add.name != "stablehlo.add":
            continue
        product, bias = (g.op(v) for v in add.operands)
        if product is not None and product.name == "stablehlo.dot_general" \
                and (bias is None or bias.name != "stablehlo.dot_general"):
            swapped[i] = dataclasses.replace(add, operands=add.operands[::-1],
                                             operand_types=add.operand_types[::-1])
    return graph.replace_ops(region, swapped, set()) if swapped else region
