"""Every row of the plain lowering's op table has examples (op_examples.py) that run like JAX
and pin the TF op types their graphs hold: a lowering that grows back (a kernel replaced by a
decomposition, a broadcast made explicit, a guard added) fails its own example."""
from __future__ import annotations

import collections

import jax
import numpy as np
import pytest
import tensorflow as tf

from jax2tf_native import linalg_portable
from tests.conftest import assert_tree_allclose
from tests.tf_ops.plain.lowering_check import XLA_OP_PREFIXES
from tests.tf_ops.plain.op_examples import EXAMPLES, Example
from tf_ops import plain
from tf_ops.plain import op_table

# Not compute: a graph's inputs, constants and plumbing.
_PLUMBING = frozenset({"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "_Arg",
                       "_Retval"})


def _module_text(example: Example) -> str:
    if example.module is not None:
        return "module @example {" + example.module + "}"
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in example.args]
    if example.polymorphic_shapes:
        scope = jax.export.SymbolicScope()
        specs = [jax.ShapeDtypeStruct(jax.export.symbolic_shape(p, scope=scope), s.dtype)
                 if p else s for p, s in zip(example.polymorphic_shapes, specs)]
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(example.fn), platforms=("cpu",), **extra)(*specs)
    return exported.mlir_module()


def _holds_row(program, op: str) -> bool:
    if op.startswith("custom_call:"):
        target = op.split(":", 1)[1]
        return any(o.name == "stablehlo.custom_call" and o.attr("call_target_name") == target
                   for o in program.ops())
    return any(o.name == op for o in program.ops())


def _signature(example: Example) -> list[tf.TensorSpec]:
    specs = []
    for i, a in enumerate(example.args):
        shape = list(np.shape(a))
        spec = (example.polymorphic_shapes or [None] * len(example.args))[i]
        if spec:
            dims = [d.strip() for d in spec.split(",")]
            shape = [s if d.isdigit() else None for d, s in zip(dims, shape)]
        specs.append(tf.TensorSpec(shape, tf.as_dtype(np.asarray(a).dtype)))
    return specs


def graph_ops(concrete) -> list[str]:
    """The compute op types of a concrete function and its library, with repeats, sorted."""
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return sorted(n.op for n in nodes if n.op not in _PLUMBING)


def run_example(example: Example):
    """(the graph's op types, its outputs, the expected outputs or None)."""
    program = plain.prepare_program(_module_text(example))
    assert _holds_row(program, example.op), \
        f"{example.id}: the example's program has no {example.op}: " \
        f"{sorted({o.name for o in program.ops()})}"
    fn = tf.function(lambda *xs: plain.run_program(program, list(xs)), autograph=False,
                     input_signature=_signature(example))
    concrete = fn.get_concrete_function()
    got = [np.asarray(t) for t in fn(*[tf.constant(a) for a in example.args])]
    if example.module is not None:
        want = [np.asarray(w) for w in jax.tree.leaves(example.reference(*example.args))]
    else:
        want = [np.asarray(w) for w in jax.tree.leaves(jax.jit(example.fn)(*example.args))]
    return graph_ops(concrete), got, want


def test_every_row_has_an_example():
    rows = set(op_table.OP_TABLE) | {f"custom_call:{t}" for t in op_table.CUSTOM_CALLS}
    covered = {e.op for e in EXAMPLES}
    missing = sorted(rows - covered)
    assert not missing, f"op table rows without an example: {missing}"
    assert not covered - rows, f"examples of no row: {sorted(covered - rows)}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_runs_like_jax_and_pins_its_ops(example):
    if example.tf_ops is None:  # the row refuses it, before any TF op is built
        with pytest.raises(plain.PlainLoweringError):
            plain.prepare_program(_module_text(example))
        return
    ops, got, want = run_example(example)
    assert not [t for t in ops if t.startswith(XLA_OP_PREFIXES)], ops
    assert ops == list(example.tf_ops), (
        f"{example.id}: the graph holds {collections.Counter(ops)}, pinned "
        f"{collections.Counter(example.tf_ops)}")
    assert_tree_allclose(got, want, rtol=example.rtol, atol=example.atol)
