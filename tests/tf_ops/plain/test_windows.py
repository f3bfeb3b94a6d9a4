"""reduce_window and select_and_scatter lowered to plain TF ops, against JAX: pooling with
padding, strides and dilations, cumulative reductions (the CPU lowering of jnp.cumsum & co),
non-identity inits, long windows (the while-loop fold), NaN, and max-pool gradients with ties
and padding, with a symbolic batch."""
import dataclasses

import flax.linen as linen
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered
from tf_ops import plain

RNG = np.random.default_rng(0)
lax = jax.lax


def _max_pool(x, window=(1, 3, 3, 1), strides=(1, 2, 2, 1), padding="SAME"):
    return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding)


def _avg_pool(x):
    return lax.reduce_window(x, 0.0, lax.add, (1, 2, 3, 1), (1, 1, 2, 1), "SAME") / 6.0


def test_pools_with_symbolic_batch():
    x = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    assert_lowers_like_jax(lambda x: (_max_pool(x), _avg_pool(x)), x,
                           polymorphic_shapes=["b, 7, 9, 3"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("window, strides, padding, count_include_pad, tf_ops", [
    ((2, 2), (2, 2), "VALID", True, {"AvgPool"}),
    ((3, 3), (2, 2), "VALID", False, {"AvgPool"}),
    ((3, 3), (2, 2), "SAME", False, {"AvgPool"}),  # TF's SAME divides by the inside count
    ((3, 3), (1, 1), "SAME", True, {"AvgPool", "Pad"}),  # JAX divides by 9: zeros padded
    ((2, 3), (1, 2), ((1, 0), (2, 1)), True, {"AvgPool", "Pad"}),
])
def test_flax_average_pools_are_tf_avg_pool(window, strides, padding, count_include_pad, tf_ops):
    x = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    x[1, 3, 4, 2] = np.nan
    types = assert_lowers_like_jax(
        lambda x: linen.avg_pool(x, window, strides, padding, count_include_pad), x,
        polymorphic_shapes=["b, 7, 9, 3"], rtol=1e-6, atol=1e-6)
    assert types - {"Placeholder", "Identity", "Const"} == tf_ops


def test_average_pool_tf_cannot_express_keeps_jax_form_within_5d():
    # count_include_pad=False with padding other than TF's SAME: TF's AvgPool would divide by
    # another count, so the division stays; a 2x2/2 window sum alone is no average either.
    # Their windowed views stay within 5 dimensions (TFLite's Slice and Reshape limit).
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    pools = lambda x: (linen.avg_pool(x, (2, 2), (2, 2), ((1, 0), (0, 1)), False),
                       lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"))
    types = assert_lowers_like_jax(pools, x, polymorphic_shapes=["b, 8, 8, 3"])
    assert "AvgPool" not in types
    program = lowered(pools, (x,), ["b, 8, 8, 3"])
    concrete = tf.function(lambda v: plain.run_program(program, [v]), autograph=False,
                           input_signature=[tf.TensorSpec([None, 8, 8, 3])]
                           ).get_concrete_function()
    ranks = [t.shape.rank for op in concrete.graph.get_operations() for t in op.outputs]
    assert max(r for r in ranks if r is not None) <= 5


def test_nan_propagates_through_max_pool():
    x = RNG.standard_normal((1, 4, 4, 3)).astype(np.float32)
    x[0, 1, 2, 0] = np.nan
    nchw_from_half = lambda x: lax.reduce_window(x, 0.5, lax.max, (1, 1, 3, 2), (1, 1, 2, 1),
                                                 "SAME")  # a non-identity init, NCHW
    types = assert_lowers_like_jax(lambda x: (_max_pool(x, padding="VALID"), nchw_from_half(x)),
                                   x)
    assert "MaxPool" in types
    # Windows wholly in the padding are the init (-inf), where MaxPool says the lowest float:
    # such pools are folded instead.
    assert_lowers_like_jax(
        lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 1, 1), (1, 2, 1, 1),
                                    [(0, 0), (0, 2), (0, 0), (0, 0)]), x)
    # A window of inputs that are all -inf gives MaxPool's floor, the lowest finite float
    # (a difference the contract lists); every other window equals JAX.
    x[0, 0:2, 0, 1] = -np.inf
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 1, 1), (1, 2, 1, 1),
                                       "VALID")
    got = tf.function(lambda v: plain.run_program(lowered(pool, (x,)), [v]))(x)[0].numpy()
    want = np.asarray(pool(x))
    floor = want == -np.inf
    assert (got[floor] == np.finfo(np.float32).min).all() and floor.sum() == 1
    np.testing.assert_array_equal(got[~floor], want[~floor])


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_max_pool_over_a_relu_guards_nan_at_the_pooled_size(padding):
    # A ReLU's output holds no -inf, so the average that flags NaN windows needs no -inf pass
    # over the full-size input first (nan_guards.never_negative_infinity): the guard's Minimum
    # reads the AvgPool. Every window kind against JAX: NaN, +inf, NaN with +inf, -inf
    # (ReLU makes it 0), and -0.0.
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 2, 2, 1], x[0, 2, 3, 1] = np.inf, -np.inf
    x[1, 4, 4, 2], x[1, 4, 5, 2] = np.nan, np.inf
    x[1, 0:2, 0:2, 0] = -0.0
    x[1, 2, 0, 0] = -np.inf
    pool = lambda x: _max_pool(jax.nn.relu(x), (1, 2, 2, 1), (1, 2, 2, 1), padding)
    assert_lowers_like_jax(pool, x, polymorphic_shapes=["b, 6, 6, 3"])
    program = lowered(pool, (x,), ["b, 6, 6, 3"])
    graph = tf.function(lambda v: plain.run_program(program, [v]), autograph=False,
                        input_signature=[tf.TensorSpec([None, 6, 6, 3])]
                        ).get_concrete_function().graph
    minimums = [op for op in graph.get_operations() if op.type == "Minimum"]
    assert [op.inputs[0].op.type for op in minimums] == ["AvgPool"]
    # Without the ReLU the -inf pass stays: a window of +inf and -inf averages to NaN.
    program = lowered(lambda x: _max_pool(x, (1, 2, 2, 1), (1, 2, 2, 1), padding), (x,))
    graph = tf.function(lambda v: plain.run_program(program, [v]), autograph=False,
                        input_signature=[tf.TensorSpec(x.shape)]).get_concrete_function().graph
    minimums = [op for op in graph.get_operations() if op.type == "Minimum"]
    assert [op.outputs[0].consumers()[0].type for op in minimums] == ["AvgPool"]
    assert_lowers_like_jax(lambda x: _max_pool(x, (1, 2, 2, 1), (1, 2, 2, 1), padding), x)


def test_dilations_and_non_identity_init_and_integers():
    x = RNG.integers(-50, 50, (5, 11), dtype=np.int32)
    assert_lowers_like_jax(
        lambda x: (lax.reduce_window(x, 3, lax.add, (2, 3), (1, 2), [(1, 2), (-1, 2)],
                                     base_dilation=(2, 1), window_dilation=(1, 2)),
                   lax.reduce_window(x, 7, lax.mul, (1, 3), (1, 1), [(0, 0), (2, 0)])), x)
    u = RNG.integers(0, 255, (4, 6), dtype=np.uint8)
    assert_lowers_like_jax(lambda u: lax.reduce_window(u, np.uint8(0), lax.max, (2, 2),
                                                       (1, 1), "SAME"), u)


def test_a_dilated_window_larger_than_the_operand_gives_an_empty_result():
    # Found by the fuzzer: the window positions' slices started past the operand's end (an
    # empty view; with a symbolic batch too).
    def pool(x, init, op):
        return jax.lax.reduce_window(x, init, op, (1, 2), (1, 1), "VALID", None, (1, 3))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    both = lambda x: (pool(x, -np.inf, jax.lax.max), pool(x, 0.0, jax.lax.add))
    for poly in (None, ["b, 3"], ["2, w"]):
        assert_lowers_like_jax(both, x, polymorphic_shapes=poly)
    empty = np.zeros((1, 0, 1), np.int32)
    for poly in (None, ["a, 0, 1"]):
        assert_lowers_like_jax(lambda x: jax.lax.reduce_window(
            x, np.int32(-2**31), jax.lax.max, (2, 2, 1), (2, 1, 2), "VALID", None, (2, 1, 2)),
            empty, polymorphic_shapes=poly)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint8])
def test_cumulative_reductions(dtype):
    x = (RNG.standard_normal((5, 6)) * 3).astype(dtype)
    tolerance = 1e-2 if dtype == ml_dtypes.bfloat16 else 1e-6
    assert_lowers_like_jax(
        lambda x: (jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=1), lax.cummax(x, axis=1),
                   lax.cummin(x, axis=0, reverse=True), lax.cumsum(x, axis=1, reverse=True)),
        x, rtol=tolerance, atol=tolerance)


def test_cumulative_bool_and_logsumexp_with_symbolic_batch():
    flags = RNG.random((3, 7)) > 0.6
    any_so_far = lambda f: lax.reduce_window(f, False, lax.bitwise_or, (1, 7), (1, 1),
                                             [(0, 0), (6, 0)])
    all_from_here = lambda f: lax.reduce_window(f, True, lax.bitwise_and, (1, 7), (1, 1),
                                                [(0, 0), (0, 6)])
    assert_lowers_like_jax(lambda f: (any_so_far(f), all_from_here(f)), flags,
                           polymorphic_shapes=["b, 7"])
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    assert_lowers_like_jax(lambda x: lax.cumlogsumexp(x, axis=1), x,
                           polymorphic_shapes=["b, 7"], rtol=1e-5, atol=1e-5)


def test_long_window_folds_in_a_loop():
    x = RNG.standard_normal((2, 10, 10, 2)).astype(np.float32)
    types = assert_lowers_like_jax(
        lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 9, 9, 1), (1, 1, 1, 1), "SAME"), x,
        polymorphic_shapes=["b, 10, 10, 2"], rtol=1e-5, atol=1e-5)
    assert "While" in types or "StatelessWhile" in types


def test_max_pool_gradient_first_max_wins_and_padding_never_selected():
    x = np.array([[1, 3, 3, 0], [3, 2, 3, -1], [-5, -4, -4, -6]], np.float32)
    x = np.tile(x[None, :, :, None], (2, 1, 1, 2))  # ties, negatives next to SAME padding
    grad = jax.grad(lambda x: jnp.sum(_max_pool(x) * jnp.arange(1.0, 9.0).reshape(1, 2, 2, 2)))
    program = lowered(grad, [x])
    assert any(op.name == "stablehlo.select_and_scatter" for op in program.ops())
    assert_lowers_like_jax(grad, x, polymorphic_shapes=["b, 3, 4, 2"])
    y = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    assert_lowers_like_jax(jax.grad(lambda y: jnp.sum(_max_pool(y, (1, 3, 2, 1)) ** 2)), y,
                           rtol=1e-5, atol=1e-5)


def test_bf16_max_pool_gradient_rounds_each_step_like_xla():
    # Overlapping windows add several values into one position: in XLA's order, rounding to
    # bfloat16 after each addition (float32 accumulation differs in the last bit).
    x = RNG.standard_normal((1, 9, 9, 2)).astype(ml_dtypes.bfloat16)
    x[0, 4, 4, 0] = 10  # the maximum of many windows
    weights = RNG.standard_normal((1, 7, 7, 2)).astype(ml_dtypes.bfloat16)
    weights[0, 2:5, 2:5, 0] = 1  # the nine windows that pick x[4, 4]
    weights[0, 2, 2, 0] = 256  # first in XLA's order: 256 + 1 rounds back to 256, eight times
    grad = jax.grad(lambda x: jnp.sum(_max_pool(x, (1, 3, 3, 1), (1, 1, 1, 1), "VALID")
                                      .astype(jnp.float32) * weights))
    assert_lowers_like_jax(grad, x, rtol=0, atol=0)


def test_max_pool_jvp_is_select_and_gather():
    x = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    t = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    assert_lowers_like_jax(lambda x, t: jax.jvp(_max_pool, (x,), (t,)), x, t)


def test_a_body_that_is_not_elementwise_is_refused():
    program = lowered(lambda x: lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID"),
                      [np.ones(4, np.float32)])
    main = program.functions["main"]
    op = next(op for op in main.body.ops if op.name == "stablehlo.reduce_window")
    body = op.regions[0]
    # A body op that is not elementwise (JAX writes none today) cannot run on whole tensors.
    odd_body = dataclasses.replace(body, ops=(dataclasses.replace(body.ops[0],
                                                                  name="stablehlo.reshape"),))
    odd = dataclasses.replace(op, regions=(odd_body,))
    ops = tuple(odd if o is op else o for o in main.body.ops)
    refused = plain.Program({"main": dataclasses.replace(
        main, body=dataclasses.replace(main.body, ops=ops))})
    with pytest.raises(plain.PlainLoweringError,
                       match=r"stablehlo.reduce_window.*stablehlo.reshape, which is not "
                             r"elementwise"):
        plain.check_program(refused)


def test_symbolic_window_sizes_through_dynamic_reduce_window():
    # Symbolic spatial sizes make JAX write the custom call stablehlo.dynamic_reduce_window
    # (padding computed at run time); a cumsum along a symbolic axis has a symbolic window.
    x = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    grad = jax.grad(lambda x: jnp.sum(_max_pool(x) ** 2))
    program = lowered(_avg_pool, [x], ["b, h, w, 3"])
    assert any(op.attr("call_target_name") == "stablehlo.dynamic_reduce_window"
               for op in program.ops())
    assert_lowers_like_jax(lambda x: (_avg_pool(x), grad(x)), x,
                           polymorphic_shapes=["b, h, w, 3"], rtol=1e-5, atol=1e-5)
    y = RNG.standard_normal((3, 6)).astype(np.float32)
    assert_lowers_like_jax(lambda y: (jnp.cumsum(y, axis=1), lax.cummax(y, axis=1)), y,
                           polymorphic_shapes=["3, n"], rtol=1e-5, atol=1e-5)


def test_an_empty_window_result_next_to_a_symbolic_dimension():
    # Base dilation of the symbolic dimension sliced to a computed end, which lost every static
    # size; the view then sliced the empty last dimension at its window offset (TF:
    # "Expected begin[4] in [0, 2], but got 4"). Found by the fuzzer.
    def f(x):
        return jax.lax.reduce_window(x, jnp.array(0, x.dtype), jax.lax.add, (3, 3, 1, 3),
                                     (1, 2, 1, 1), ((0, 1), (1, 2), (0, 2), (2, 0)),
                                     (2, 1, 1, 1), (1, 1, 2, 2))

    for x in (np.zeros((1, 1, 1, 0), np.uint32), np.ones((3, 1, 1, 0), np.float32)):
        assert_lowers_like_jax(f, x, polymorphic_shapes=["a, 1, 1, 0"], exact=True)
    x = np.arange(40, dtype=np.float32).reshape(2, 4, 5, 1)
    assert_lowers_like_jax(lambda x: jax.lax.reduce_window(
        x, 0.0, jax.lax.add, (2, 2, 2, 1), (1, 2, 1, 1), ((0, 1), (1, 0), (0, 0), (0, 0)),
        (2, 1, 2, 1)), x, polymorphic_shapes=["a, 4, 5, 1"], exact=True)
