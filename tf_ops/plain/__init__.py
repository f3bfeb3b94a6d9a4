"""StableHLO -> ordinary TF ops (`enable_xla=False`): graphs that run without XLA.

A module exported by `jax.export` is read into plain records (`program`), checked op by op at
conversion (`interpreter.check_program`: what cannot be lowered exactly is refused with
`PlainLoweringError`), then built as TF ops (`interpreter.run_program`), one module per family
of ops (elementwise, shapes, indexing, reductions, windows, contractions, sorting, control
flow, ...), listed in one table (`op_table`).
"""
from tf_ops.plain.errors import PlainLoweringError
from tf_ops.plain.interpreter import check_program, run_program
from tf_ops.plain.program import Program, read_program
from tf_ops.plain.rewrite import simplify


def prepare_program(module_text: str) -> Program:
    """A module's `Program` ready to run: read, JAX's decompositions raised back to TF's ops
    (`rewrite.simplify`), every op checked (`PlainLoweringError` for the first that cannot be
    lowered exactly).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> exp = jax.export.export(jax.jit(jax.nn.relu))(jax.ShapeDtypeStruct((2,), "float32"))
        >>> [op.name for op in prepare_program(exp.mlir_module()).ops()]
        ['func.call', 'raised.relu']
    """
    program = simplify(read_program(module_text))
    check_program(program)
    return program


__all__ = ["PlainLoweringError", "Program", "check_program", "prepare_program", "read_program",
           "run_program", "simplify"]
