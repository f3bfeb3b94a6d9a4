"""stablehlo.reduce lowered to plain TF ops: sums, products, max/min with NaN, boolean and
bitwise reductions, init values, argmax/argmin with NaNs and ties, empty and symbolic sizes,
and the bodies that are refused."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered
from tf_ops import plain

RNG = np.random.RandomState(0)
F32 = np.array([[1.5, np.nan, -0.0, 2.0], [-3.0, 0.0, 4.0, -np.inf], [2.0, 2.0, -1.0, 0.5]],
               np.float32)


def _reductions(x):
    return (jnp.sum(x, 0), jnp.prod(x, 1), jnp.max(x, 1), jnp.min(x, 0),
            jnp.max(x, keepdims=True), jnp.sum(x, axis=()))


def test_float_reductions_propagate_nan():
    assert_lowers_like_jax(_reductions, F32)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.uint32, np.int8])
def test_integer_reductions_wrap_like_xla(dtype):
    x = RNG.randint(0, 120, size=(3, 5)).astype(dtype)
    assert_lowers_like_jax(_reductions, x, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_float_reductions(dtype):
    x = RNG.uniform(-2, 2, size=(4, 40)).astype(dtype)
    # XLA's CPU backend rounds each partial sum to the narrow type; we round once.
    assert_lowers_like_jax(lambda x: _as_f32(jax.lax.reduce_sum_p.bind(x, axes=(1,)),
                                             jax.lax.reduce_max_p.bind(x, axes=(0,)),
                                             jnp.sum(x), jnp.mean(x, 1)),
                           x, rtol=1e-2, atol=2e-2)


def _as_f32(*results):
    """bf16 results as float32 for the comparison (the TF->numpy bridge has no bf16 view)."""
    return tuple(r.astype(jnp.float32) for r in results)


def test_boolean_and_bitwise_reductions():
    b = np.array([[True, False, True], [True, True, True]])
    assert_lowers_like_jax(lambda b: (jnp.any(b, 0), jnp.all(b, 1), jnp.sum(b, 1),
                                      jax.lax.reduce_xor_p.bind(b, axes=(0,))), b)
    x = np.array([[0b1011, -1, 6], [0b0110, 5, 3]], np.int32)
    u = x.astype(np.uint8)
    for a in (x, u):
        assert_lowers_like_jax(lambda a: (jax.lax.reduce_and_p.bind(a, axes=(0,)),
                                          jax.lax.reduce_or_p.bind(a, axes=(1,)),
                                          jax.lax.reduce_xor_p.bind(a, axes=(0, 1))), a)


def test_init_value_is_applied_once_and_is_the_empty_result():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_lowers_like_jax(lambda x: (jax.lax.reduce(x, 3.0, jax.lax.add, (0,)),
                                      jax.lax.reduce(x, 5.0, jax.lax.max, (1,)),
                                      jax.lax.reduce(x, -np.inf, jax.lax.max, (0, 1))), x)
    empty = np.zeros((0, 3), ml_dtypes.bfloat16)
    assert_lowers_like_jax(lambda x: (jax.lax.reduce(x, -np.inf, jax.lax.max, (0,)),
                                      jax.lax.reduce(x, 2.0, jax.lax.add, (0,))),
                           empty.astype(np.float32))
    assert_lowers_like_jax(lambda x: _as_f32(jax.lax.reduce_max_p.bind(x, axes=(0,))), empty)


def test_complex_sum_and_product():
    z = (RNG.randn(3, 4) + 1j * RNG.randn(3, 4)).astype(np.complex64)
    assert_lowers_like_jax(lambda z: (jnp.sum(z, 0), jnp.prod(z, 1)), z, rtol=1e-5)


def test_argmax_argmin_nan_ties_keepdims():
    x = np.array([[1.0, 3.0, 3.0, np.nan, np.nan], [-np.inf, -np.inf, -1.0, -1.0, 0.0],
                  [2.0, np.nan, 7.0, 7.0, 1.0]], np.float32)
    assert_lowers_like_jax(lambda x: (jnp.argmax(x, 1), jnp.argmin(x, 1), jnp.argmax(x, 0),
                                      jnp.argmin(x, 0, keepdims=True), jnp.argmax(x),
                                      jax.lax.argmax(x, 1, jnp.int32)), x)
    i = np.array([[3, 1, 3, -2], [0, 0, -5, -5]], np.int32)
    assert_lowers_like_jax(lambda i: (jnp.argmax(i, 1), jnp.argmin(i, 1),
                                      jnp.argmax(i.astype(jnp.uint8), 0),
                                      jnp.argmax(i > 0, 1)), i)


def test_models_softmax_logsumexp_layer_norm():
    x = RNG.randn(4, 6).astype(np.float32)

    def layer_norm(x):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.var(x, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5)
    assert_lowers_like_jax(lambda x: (jax.nn.softmax(x), jax.nn.logsumexp(x, 1), layer_norm(x)),
                           x, rtol=1e-5, atol=1e-6)


def test_symbolic_batch():
    x = RNG.randn(5, 3).astype(np.float32)
    x[1, 2] = np.nan
    assert_lowers_like_jax(lambda x: (jnp.sum(x, 0), jnp.max(x, 1), jnp.argmax(x, 0),
                                      jnp.argmin(x, 1), jax.nn.softmax(x, 0)), x,
                           polymorphic_shapes=["b, 3"])


def test_unrecognized_bodies_are_refused_at_conversion():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(plain.PlainLoweringError, match="reduce body .* is not one TF can"):
        lowered(lambda x: jax.lax.reduce(x, 0.0, lambda a, b: a * 2 + b, (0,)), [x])
    z = np.ones((3,), np.complex64)
    with pytest.raises(plain.PlainLoweringError, match="reduce"):
        lowered(lambda z: jax.lax.reduce_max_p.bind(z, axes=(0,)), [z])


def _max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


@pytest.mark.parametrize("f", [jnp.max, jnp.min])
def test_jaxlib_drops_nan_from_4096_elements_where_plain_keeps_it(f):
    # jaxlib 0.10's CPU backend runs float32/float64 max/min reductions over 4,096 elements or
    # more with YNNPACK's kernels, which drop NaN; below that size (as in StableHLO's semantics
    # and on other backends) NaN propagates. The plain lowering keeps NaN in reductions at
    # every size, a known difference (docs/exactness.md, "jaxlib's CPU kernels"): when this
    # fails after an upgrade, that paragraph is what to update.
    x = np.abs(RNG.randn(4096)).astype(np.float32) + 1
    x[2048] = np.nan
    assert np.isnan(jax.jit(f)(x[:-4]))      # 4,092 elements: NaN propagates
    assert not np.isnan(jax.jit(f)(x))       # 4,096: jaxlib drops it
    got = plain.run_program(lowered(f, [x]), [tf.constant(x)])[0].numpy()
    assert np.isnan(got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pools_skip_nan_where_jaxlib_does(dtype):
    # Pooling whose stride is its window runs on YNNPACK's kernels too, from 4,096 operand
    # elements (windows.JAXLIB_NAN_SKIPPING_POOL_ELEMENTS): there the plain graph is TF's
    # MaxPool alone, which skips NaN as they do; below, its NaN guard keeps JAX's NaN. Both
    # equal jax.jit, with a static and with a symbolic batch (the batch is at least 1).
    with jax.enable_x64(dtype == np.float64):
        x = (np.abs(RNG.randn(2, 64, 64, 1)) + 1).astype(dtype)
        x[:, 1, 1, 0] = np.nan
        for shape, keeps in [((1, 64, 64, 1), False), ((1, 64, 62, 1), True),
                             ((2, 32, 64, 1), False)]:
            part = x[:shape[0], :shape[1], :shape[2]]
            assert np.isnan(jax.jit(_max_pool)(part)).any() == keeps
            guarded = "AvgPool" in assert_lowers_like_jax(_max_pool, part, exact=True)
            assert guarded == keeps
        assert_lowers_like_jax(_max_pool, x[:1, :, :62], exact=True,
                               polymorphic_shapes=["b, 64, 62, 1"])
        types = assert_lowers_like_jax(_max_pool, x[:1], exact=True,
                                       polymorphic_shapes=["b, 64, 64, 1"])
        assert "AvgPool" not in types
        # Overlapping windows (stride 1) are pooled by XLA's own loop, which keeps NaN.
        overlapping = lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1),
                                                      (1, 1, 1, 1), "VALID")
        assert "AvgPool" in assert_lowers_like_jax(overlapping, x[:1], exact=True)
