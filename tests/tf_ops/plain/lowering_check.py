"""The one check the plain-lowering tests share: a JAX function, exported, lowered to plain TF
ops, equals JAX eagerly and in a `tf.function` (also with `None` dimensions), and the graph holds
no XLA op."""
from __future__ import annotations

import jax
import numpy as np
import tensorflow as tf

from tests.conftest import assert_tree_allclose
from tf_ops import plain

XLA_OP_PREFIXES = ("Xla", "_Xla")


def export(f, args, polymorphic_shapes=None):
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    if polymorphic_shapes is not None:
        scope = jax.export.SymbolicScope()  # one scope: arguments may share a symbol ("b")
        specs = [jax.ShapeDtypeStruct(jax.export.symbolic_shape(p, scope=scope), s.dtype)
                 if p else s for p, s in zip(polymorphic_shapes, specs)]
    return jax.export.export(jax.jit(f), platforms=["cpu"])(*specs)


def lowered(f, args, polymorphic_shapes=None) -> plain.Program:
    return plain.prepare_program(export(f, args, polymorphic_shapes).mlir_module())


def graph_op_types(concrete_function) -> set[str]:
    """Op types of a concrete function's graph and every function in its library."""
    graph_def = concrete_function.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def assert_same_bits(got_leaves, want_leaves):
    """Equal element types, shapes and bits (so signs of zeros too); NaNs of any payload and
    sign count as equal (no TF kernel promises a NaN's bits)."""
    assert len(got_leaves) == len(want_leaves)
    for got, want in zip(got_leaves, want_leaves):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                     got.shape, want.shape)
        parts = [(got.real, want.real), (got.imag, want.imag)] if got.dtype.kind == "c" \
            else [(got, want)]
        for g, w in parts:
            if g.dtype.itemsize in (2, 4, 8) and g.dtype.kind not in "iub":
                bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[g.dtype.itemsize]
                nan = np.isnan(w.astype(np.float64))
                np.testing.assert_array_equal(np.isnan(g.astype(np.float64)), nan)
                np.testing.assert_array_equal(g.view(bits)[~nan], w.view(bits)[~nan],
                                              err_msg=f"got {g[~nan]}\nwant {w[~nan]}")
            else:
                np.testing.assert_array_equal(g, w)


def assert_lowers_like_jax(f, *args, polymorphic_shapes=None, rtol=1e-6, atol=1e-6,
                           exact=False):
    """Checks eager and graph results against `jax.jit(f)` (`exact`: bit for bit, signs of
    zeros included; else to rtol/atol); with `polymorphic_shapes` (one string or None per
    argument, e.g. "b, 3") the graph is traced with None for each symbolic dimension. Returns
    the graph's op types."""
    program = lowered(f, args, polymorphic_shapes)
    want = jax.jit(f)(*args)
    want_leaves = jax.tree.leaves(want)
    tensors = [tf.constant(a) for a in args]
    got = plain.run_program(program, tensors)
    compare = assert_same_bits if exact else \
        (lambda got, want: assert_tree_allclose(got, want, rtol=rtol, atol=atol))
    compare(got, want_leaves)
    signature = []
    for a, p in zip(args, polymorphic_shapes or [None] * len(args)):
        shape = list(np.shape(a))
        if p:
            dims = [d.strip() for d in p.strip("()").split(",")]
            shape = [None if not d.isdigit() and d != "..." else s for d, s in zip(dims, shape)]
        signature.append(tf.TensorSpec(shape, tf.as_dtype(np.asarray(a).dtype)))
    graph_fn = tf.function(lambda *xs: plain.run_program(program, list(xs)), autograph=False,
                           input_signature=signature)
    concrete = graph_fn.get_concrete_function()
    compare(graph_fn(*tensors), want_leaves)
    types = graph_op_types(concrete)
    xla = sorted(t for t in types if t.startswith(XLA_OP_PREFIXES))
    assert not xla, f"XLA ops in the plain graph: {xla}"
    return types
