"""The plain lowering's core: reading modules, elementwise semantics where TF and StableHLO
differ, shapes, loops and conditionals, symbolic dimensions, and refusals."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import tensorflow as tf

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, export, lowered
from tf_ops import plain

X = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)


def test_elementwise_float():
    assert_lowers_like_jax(lambda x: (jnp.tanh(x) * 2 + jnp.exp(x), jnp.maximum(x, 0.5),
                                      jax.nn.sigmoid(x), jnp.log1p(jnp.abs(x))), X)


def test_nan_propagates_through_max_min():
    x = np.array([np.nan, 1.0, -np.inf, 2.0], np.float32)
    y = np.array([0.0, np.nan, 1.0, np.nan], np.float32)
    assert_lowers_like_jax(lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b),
                                         jnp.clip(a, -1.0, 1.0)), x, y)


def test_max_min_with_a_nonzero_constant_are_tf_maximum_minimum_and_keep_nan():
    # TF's Maximum/Minimum against a scalar keep a NaN in every float dtype, in both operand
    # orders and in the vector tail (lengths 1-17: every position): the lowering relies on it.
    @tf.function(autograph=False)
    def kernels(x, c):
        return [tf.maximum(x, c), tf.maximum(c, x), tf.minimum(x, c), tf.minimum(c, x)]

    for dtype in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64):
        for n in range(1, 18):
            x = np.ones((n, n), np.float64)
            np.fill_diagonal(x, np.nan)
            for c in (0.5, -np.inf):
                for y in kernels(tf.constant(x.astype(dtype)), tf.constant(np.array(c, dtype))):
                    np.testing.assert_array_equal(np.isnan(y.numpy().astype(np.float64)),
                                                  np.isnan(x))
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 0.5, -0.5, 3.0], np.float32)
    types = assert_lowers_like_jax(lambda x: (jnp.maximum(x, 0.5), jnp.minimum(-0.5, x),
                                              jnp.clip(x, -1.0, 2.0), jnp.maximum(x, -np.inf)),
                                   x)
    assert types - {"Placeholder", "Identity", "Const"} == {"Maximum", "Minimum"}


def test_integer_division_and_remainder_edge_cases():
    a = np.array([-7, 7, 0, np.iinfo(np.int32).min, 5, -5], np.int32)
    b = np.array([2, -2, 0, -1, 0, 3], np.int32)
    assert_lowers_like_jax(lambda a, b: (a // b, a % b, jax.lax.div(a, b), jax.lax.rem(a, b)),
                           a, b)
    ua = np.array([7, 200, 0, 255], np.uint8)
    ub = np.array([2, 0, 0, 7], np.uint8)
    assert_lowers_like_jax(lambda a, b: (jax.lax.div(a, b), jax.lax.rem(a, b), a * b, -a),
                           ua, ub)


def test_shifts_past_the_bit_width():
    a = np.array([-7, 7, 1, -128, 5], np.int32)
    s = np.array([1, 33, 31, 2, -1], np.int32)
    assert_lowers_like_jax(lambda a, s: (a << s, a >> s, jax.lax.shift_right_logical(a, s)),
                           a, s)


def test_float_to_int_saturates_and_nan_is_zero():
    x = np.array([np.nan, 1e10, -1e10, 3.7, -3.7, 255.5, 256, -0.5], np.float32)
    assert_lowers_like_jax(lambda x: (x.astype(jnp.int32), x.astype(jnp.uint8),
                                      x.astype(jnp.int8), x.astype(jnp.bool_)), x)


def test_rounding_modes():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 3.2, -3.7], np.float32)
    assert_lowers_like_jax(lambda x: (jnp.round(x), jax.lax.round(
        x, jax.lax.RoundingMethod.AWAY_FROM_ZERO), jnp.floor(x), jnp.ceil(x)), x)


def test_integer_power_popcount_clz():
    assert_lowers_like_jax(lambda a, b: a ** b, np.array([2, -1, 1, 3, 0, -2], np.int32),
                           np.array([3, -3, -5, -1, 0, 5], np.int32))
    assert_lowers_like_jax(lambda x: (jax.lax.population_count(x), jax.lax.clz(x)),
                           np.array([0, 1, -1, 255, 1 << 20], np.int32))


def test_reduce_precision_and_bitcast():
    x = np.array([1.0001, 3.14159, 1e-6, 70000.0, -2.5, np.nan], np.float32)
    assert_lowers_like_jax(lambda x: (jax.lax.reduce_precision(x, 5, 10),
                                      jax.lax.bitcast_convert_type(x, jnp.int32)), x)


def test_total_order_compare():
    x = np.array([np.nan, -np.nan, -0.0, 0.0, -np.inf, 1.0], np.float32)
    f = lambda a, b: jax.lax.compare_total_order_p.bind(a, b, direction="LT") \
        if hasattr(jax.lax, "compare_total_order_p") else a < b
    assert_lowers_like_jax(lambda a: a[:, None] < a[None, :], x)


def test_pads_slices_and_broadcasts():
    assert_lowers_like_jax(lambda x: (jnp.pad(x, ((1, 2), (0, 1))),
                                      jax.lax.pad(x, 0., ((1, -1, 1), (-1, 2, 2))),
                                      x.T, x[1:3, ::2], jnp.concatenate([x, x], 1), x[::-1],
                                      jnp.broadcast_to(x[:, None, :], (4, 2, 3))), X)


def test_loops_and_conditionals():
    assert_lowers_like_jax(lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c * 1.1 + i, x), X)
    assert_lowers_like_jax(
        lambda x, i: jax.lax.switch(i, [lambda: x + 1, lambda: x * 2, lambda: -x]),
        X, np.int32(5))


def test_a_loop_carry_of_a_symbolic_size_keeps_its_static_dimensions():
    # The scan's zero carry is a broadcast to (1, a): TF loses its static 1 in the body, and
    # tf.while_loop refused the value as less specific than the loop's type (found by the fuzzer).
    f = lambda x: jax.lax.scan(lambda c, xi: (c + xi, c), jnp.zeros_like(x[0]), x)[1]
    for shape, poly in (((1, 3), "1, a"), ((2, 1, 3), "2, 1, a"), ((3, 2), "b, a")):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2
        assert_lowers_like_jax(f, x, polymorphic_shapes=[poly])


def test_symbolic_batch_is_read_at_run_time():
    """One graph traced with a None batch serves every batch size."""
    f = lambda x: jnp.concatenate([jnp.sin(x), x * 2], axis=1) + jnp.arange(6.0)
    assert_lowers_like_jax(f, X, polymorphic_shapes=["b, 3"])
    program = lowered(f, (X,), ["b, 3"])
    graph = tf.function(lambda x: plain.run_program(program, [x]), autograph=False,
                        input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    for batch in (1, 7):
        x = np.linspace(-2, 2, batch * 3, dtype=np.float32).reshape(batch, 3)
        np.testing.assert_allclose(graph(x)[0].numpy(), jax.jit(f)(x), rtol=1e-6)


def test_constants_of_every_dtype():
    assert_lowers_like_jax(lambda x: (x * jnp.bfloat16(3), jnp.array([1.5, 2], jnp.bfloat16),
                                      jnp.array([1 + 2j, 3j], jnp.complex64),
                                      jnp.array([True, False]), jnp.array([1, 2], jnp.uint16)),
                           np.ones(2, jnp.bfloat16), rtol=1e-2)


def test_refusal_names_op_dtype_and_source():
    exported = export(lambda x: jax.lax.reduce_precision(x, 5, 10).astype(jnp.float8_e4m3fn),
                      [X])
    program = plain.read_program(exported.mlir_module())
    with pytest.raises(plain.PlainLoweringError, match=r"stablehlo.convert.*f8E4M3FN.*"
                       r"test_core.py:\d+.*cannot be converted with enable_xla=False\. "
                       r"Fix: convert with enable_xla=True"):
        plain.check_program(program)
    assert isinstance(plain.PlainLoweringError("x"), NotImplementedError)


def test_identity_rewrite_of_two_broadcasts_keeps_the_result_shape():
    # x + 0 -> x where both operands are broadcasts of scalars: the broadcast scalar must come
    # back at the result's shape (jax.random's threefry adds a zero splat to a broadcast key).
    def f(s):
        return jnp.broadcast_to(s, (200,)) + jnp.zeros((200,), jnp.uint32), \
            jnp.ones((3, 4), jnp.float32) * jnp.broadcast_to(s.astype(jnp.float32), (3, 4))
    assert_lowers_like_jax(f, np.uint32(7), rtol=0, atol=0)


def test_a_broadcast_that_repeats_nothing_is_a_reshape_not_a_broadcast_to():
    # New dimensions of size 1 and the symbolic batch kept (lax.expand_dims, an identity
    # broadcast_in_dim; Equinox's vmapped convolutions are full of them): no BroadcastTo with a
    # shape computed from the batch, which Core ML's converter refuses.
    f = lambda x: (jnp.expand_dims(x, 1) * 2, jax.lax.expand_dims(x, (0, 2)) + 1,
                   jax.lax.broadcast_in_dim(x, x.shape, (0, 1)) - 1)
    assert_lowers_like_jax(f, X, polymorphic_shapes=["b, 3"])
    program = lowered(f, (X,), ["b, 3"])
    graph = tf.function(lambda x: plain.run_program(program, [x]), autograph=False,
                        input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    ops = {op.type for op in graph.get_concrete_function().graph.get_operations()}
    assert "BroadcastTo" not in ops, sorted(ops)
    for batch in (1, 7):
        x = np.linspace(-2, 2, batch * 3, dtype=np.float32).reshape(batch, 3)
        for got, want in zip(graph(x), jax.jit(f)(x)):
            np.testing.assert_array_equal(got.numpy(), want)


def test_an_op_on_broadcasts_only_stays_a_broadcast_until_a_full_operand_meets_it():
    # Flax's causal mask: arange(t) broadcast to the batch, compared with itself, and-ed with a
    # padding mask, then used by a where on the (b, t, t) scores. The compare runs on (t, 1)
    # against (t,), the and on (b, t, 1) against (b, 1, t): no BroadcastTo to a shape computed
    # from b and t (Core ML's converter refuses one). A positional embedding's `[:t]` slice
    # (a gather indexing one dimension) builds no index grid either.
    emb = np.arange(32, dtype=np.float32).reshape(8, 4)

    def f(ids, scores):
        b, t = ids.shape
        idx = jnp.broadcast_to(jnp.arange(t), (b, t))
        causal = idx[:, :, None] >= idx[:, None, :]
        pad = ids > 0
        mask = jnp.logical_and(causal, pad[:, :, None] & pad[:, None, :])
        return jnp.where(mask, scores, -1e9), jnp.asarray(emb)[:t]

    ids = np.array([[3, 1, 0], [2, 0, 5]], np.float32)
    scores = np.linspace(-1, 1, 18, dtype=np.float32).reshape(2, 3, 3)
    poly = ["b, t", "b, t, t"]
    assert_lowers_like_jax(f, ids, scores, polymorphic_shapes=poly)
    program = lowered(f, (ids, scores), poly)
    graph = tf.function(lambda *a: plain.run_program(program, list(a)), autograph=False,
                        input_signature=[tf.TensorSpec([None, None], tf.float32),
                                         tf.TensorSpec([None, None, None], tf.float32)])
    ops = {op.type for op in graph.get_concrete_function().graph.get_operations()}
    assert "BroadcastTo" not in ops, sorted(ops)
    for b, t in ((1, 1), (3, 5)):
        ids = np.arange(b * t, dtype=np.float32).reshape(b, t) % 3
        scores = np.ones((b, t, t), np.float32)
        for got, want in zip(graph(ids, scores), jax.jit(f)(ids, scores)):
            np.testing.assert_array_equal(got.numpy(), want)


def test_a_dense_layers_bias_is_added_first_where_exact_gelu_follows():
    # tensorflowjs's converter fuses MatMul + BiasAdd + GELU into a node TF.js runs without the
    # GELU, but makes no BiasAdd of AddV2(bias, product) (rewrite/bias_first.py). Elsewhere the
    # product stays first, so a ReLU layer still becomes one _FusedMatMul there.
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    x = rng.normal(size=(2, 4)).astype(np.float32)

    def add_inputs(f):
        assert_lowers_like_jax(f, x, polymorphic_shapes=["b, 4"])
        program = lowered(f, (x,), ["b, 4"])
        graph = tf.function(lambda a: plain.run_program(program, [a]), autograph=False,
                            input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        ops = graph.get_concrete_function().graph.get_operations()
        return [[t.op.type for t in op.inputs] for op in ops
                if op.type == "AddV2" and "MatMul" in [t.op.type for t in op.inputs]]

    gelu = add_inputs(lambda x: jax.nn.gelu(x @ w + b, approximate=False))
    relu = add_inputs(lambda x: jax.nn.relu(x @ w + b))
    assert len(gelu) == 1 and gelu[0][1] == "MatMul" != gelu[0][0], gelu
    assert len(relu) == 1 and relu[0][0] == "MatMul" != relu[0][1], relu


def test_a_bias_broadcast_over_a_symbolic_batch_is_one_dimensional():
    # jnp adds a [c] bias to a [b, c] product as broadcast_in_dim of a [1, c] reshape. Kept as
    # a [1, c] constant, Grappler's remapper made a BiasAdd of AddV2(MatMul, [1, c]) over a
    # sliced input, which failed at run time ("bias must be 1-dimensional[1,4]").
    rng = np.random.default_rng(1)
    w, b = rng.normal(size=(12, 4)).astype(np.float32), np.float32([0.5, -1, 2, 0])
    x = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)
    f = lambda x: jax.nn.relu(x.reshape(x.shape[0], -1)[:, :12] @ w + b)
    program = lowered(f, (x,), ["b, 6, 6, 3"])
    graph = tf.function(lambda a: plain.run_program(program, [a]), autograph=False,
                        input_signature=[tf.TensorSpec([None, 6, 6, 3], tf.float32)])
    np.testing.assert_allclose(graph(tf.constant(x))[0].numpy(), jax.jit(f)(x), rtol=1e-5,
                               atol=1e-6)
    ops = graph.get_concrete_function().graph.get_operations()
    biases = [t.shape.as_list() for op in ops if op.type == "AddV2" for t in op.inputs
              if t.op.type == "Const"]
    assert biases == [[4]], biases
