"""Rewrites of a `Program` before it is lowered: JAX's decompositions raised back to the TF
ops a TF engineer writes.

The exported module spells out what TF has single kernels for: `erfc` as a ~40-op polynomial,
softmax as max/subtract/exp/sum/divide, ReLU as a maximum with a broadcast zero. Each pass
finds one such form and replaces it with a `raised.*` op (`raised_ops.py` lowers them; the op
table lists them beside the StableHLO ops), so TFLite, TF.js, tf2onnx and Core ML meet the ops
they pattern-match, and TF runs one kernel instead of a chain.

A pass replaces a form only where the kernel computes the same function within the exactness
contract (docs/exactness.md): for each kernel the bound is measured (for one-argument
functions over every input of the dtype, `tools/kernel_bounds.py`), and forms whose kernel has
no measured bound for the dtype are left as they are.
"""
from __future__ import annotations

from tf_ops.plain.program import Program
from tf_ops.plain.rewrite import bias_first, common_values, dead_code, kernels, patterns


def simplify(program: Program) -> Program:
    """`program` with the forms TF has kernels for raised, and dead ops removed.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from tf_ops.plain.program import read_program
        >>> exp = jax.export.export(jax.jit(jax.lax.erfc))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> program = simplify(read_program(exp.mlir_module()))
        >>> sorted({op.name for op in program.ops()})
        ['raised.unary']
    """
    program = kernels.raise_kernels(program)
    program = patterns.raise_patterns(program)
    program = bias_first.order(program)
    program = common_values.merge(program)
    return dead_code.remove(program)
