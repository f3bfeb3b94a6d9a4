"""stablehlo.sort and top_k lowered to plain TF ops: JAX's total order (NaNs last, -0.0 before
0.0), stability, descending order, several keys, carried operands, integer and boolean keys,
symbolic batch sizes, and the comparators that are refused."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, export, lowered
from tf_ops import plain
from tf_ops.plain import sorting

RNG = np.random.RandomState(0)
SPECIAL = np.array([[np.nan, 1.0, -0.0, 0.0, -np.inf, 1.0, -np.nan, np.inf, -1.0, 0.0],
                    [3.0, 3.0, 2.0, np.nan, 2.0, -0.0, 3.0, 0.0, -0.0, 1.0]], np.float32)


def _sorts(x):
    return (jnp.sort(x, 1), jnp.argsort(x, 1), jnp.sort(x, 0, descending=True),
            jnp.argsort(x, 1, descending=True), jax.lax.top_k(x, 4))


def test_float_sort_total_order_nan_and_signed_zero():
    got_types = assert_lowers_like_jax(_sorts, SPECIAL, rtol=0, atol=0)
    assert "TopKV2" in got_types


def test_sorted_signed_zeros_keep_their_sign_and_order():
    x = np.array([0.0, -0.0, 0.0, -0.0, -1.0], np.float32)
    program = lowered(jnp.sort, [x])
    got = np.asarray(plain.run_program(program, [tf.constant(x)])[0])
    want = np.asarray(jnp.sort(x))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.uint32, np.int8, np.bool_])
def test_integer_and_boolean_keys(dtype):
    x = RNG.randint(0, 3 if dtype == np.bool_ else 200, size=(3, 12)).astype(dtype)
    if dtype == np.int32:
        x[0, :3] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, -1]
    funcs = _sorts if dtype != np.bool_ else (lambda x: (jnp.sort(x, 1), jnp.argsort(x, 1)))
    assert_lowers_like_jax(funcs, x, rtol=0, atol=0)


def test_narrow_floats():
    x = SPECIAL.astype(ml_dtypes.bfloat16)
    assert_lowers_like_jax(lambda x: (jnp.argsort(x, 1), jax.lax.top_k(x, 3)[1],
                                      jnp.sort(x.astype(jnp.float16), 1).astype(jnp.float32)),
                           x, rtol=0, atol=0)


def test_several_keys_and_carried_values():
    a = np.array([2, 1, 2, 1, 2, 0, 1], np.int32)
    b = np.array([0.5, np.nan, -1.0, 0.5, -1.0, 3.0, -0.0], np.float32)
    c = np.arange(7, dtype=np.int32) * 10
    assert_lowers_like_jax(lambda a, b, c: (jax.lax.sort((a, b, c), num_keys=2),
                                            jax.lax.sort((b, a, c), num_keys=1),
                                            jax.lax.sort((a, b, c), num_keys=3,
                                                         is_stable=False)), a, b, c,
                           rtol=0, atol=0)


def test_median_and_complex_sort():
    x = RNG.randn(5, 7).astype(np.float32)
    z = (RNG.randint(0, 2, (6,)) + 1j * RNG.randint(0, 3, (6,))).astype(np.complex64)
    assert_lowers_like_jax(lambda x, z: (jnp.median(x, 1), jnp.median(x), jnp.sort(z)), x, z)


def test_symbolic_batch():
    x = RNG.randn(4, 6).astype(np.float32)
    x[2, 1] = np.nan
    assert_lowers_like_jax(lambda x: (jnp.sort(x, 1), jnp.argsort(x, 0), jax.lax.top_k(x, 2)),
                           x, polymorphic_shapes=["b, 6"], rtol=0, atol=0)


def test_unrecognized_or_unstable_comparators_are_refused():
    x = np.ones((5,), np.float32)
    i = np.arange(5, dtype=np.int32)
    with pytest.raises(plain.PlainLoweringError, match="unstable sort"):
        lowered(lambda x, i: jax.lax.sort((x, i), num_keys=1, is_stable=False), [x, i])
    with pytest.raises(plain.PlainLoweringError, match="compares floats with FLOAT"):
        plain.check_program(plain.read_program(_hand_written_sort(
            "%1 = stablehlo.compare LT, %a, %b, FLOAT")))
    with pytest.raises(plain.PlainLoweringError, match="not a lexicographic"):
        plain.check_program(plain.read_program(_hand_written_sort(
            "%1 = stablehlo.compare LE, %a, %b, TOTALORDER")))
    with pytest.raises(plain.PlainLoweringError, match="not a lexicographic"):
        plain.check_program(plain.read_program(_hand_written_sort(
            "%2 = stablehlo.abs %a : tensor<f32>\n"
            "      %1 = stablehlo.compare LT, %2, %b, TOTALORDER")))


def _hand_written_sort(comparison: str) -> str:
    """A module whose sort compares with `comparison` (defining %1), as StableHLO text."""
    return f"""
module @m {{
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
    %0 = "stablehlo.sort"(%arg0) <{{dimension = 0 : i64, is_stable = true}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      {comparison} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    }}) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }}
}}
"""


def test_chlo_top_k_op_itself():
    """Modules may hold chlo.top_k itself (JAX today writes a composite around a sort)."""
    program = plain.read_program("""
module @m {
  func.func public @main(%arg0: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>) {
    %0:2 = chlo.top_k(%arg0, k = 3) : tensor<2x5xf32> -> (tensor<2x3xf32>, tensor<2x3xi32>)
    return %0#0, %0#1 : tensor<2x3xf32>, tensor<2x3xi32>
  }
}
""")
    plain.check_program(program)
    x = np.array([[1, np.nan, 3, 3, -0.0], [0.0, -0.0, -np.nan, 2, 2]], np.float32)
    got = plain.run_program(program, [tf.constant(x)])
    for g, w in zip(got, jax.lax.top_k(x, 3)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_top_k_takes_jax_composite_form():
    """sorting.top_k on JAX's `stablehlo.composite "chlo.top_k"` (k in its attributes) equals
    JAX, for a composite lowering that dispatches to it instead of the full sort."""
    x = SPECIAL[:, :8]
    program = plain.read_program(export(lambda x: jax.lax.top_k(x, 5), [x]).mlir_module())
    composite, = [op for op in program.functions["main"].body.ops
                  if op.name == "stablehlo.composite"]
    got = sorting.top_k(None, composite, tf.constant(x))
    for g, w in zip(got, jax.lax.top_k(x, 5)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
