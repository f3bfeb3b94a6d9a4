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

__all__ = ["PlainLoweringError", "Program", "check_program", "read_program", "run_program"]
