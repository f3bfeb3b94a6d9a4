"""Edge values where plain TF ops once gave other values than JAX (issue 35), each checked bit
for bit against jax.jit on CPU (signs of zeros included), eagerly and in a tf.function (where
TF's graph optimizer runs), with static and symbolic shapes. Numbers in comments were measured
on jax 0.10.2 / TF 2.21."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered
from tf_ops import exactness, plain

lax = jax.lax
RNG = np.random.default_rng(35)
BF16 = ml_dtypes.bfloat16


def _exact(f, *args, polymorphic_shapes=None):
    return assert_lowers_like_jax(f, *args, polymorphic_shapes=polymorphic_shapes, exact=True)


def _ties(shape):
    """Small integers and both zeros: many tied values."""
    x = RNG.integers(-2, 3, shape).astype(np.float32)
    return np.where(RNG.random(shape) < 0.3, -0.0, x).astype(np.float32)


# ------------------------------------------------------------------------ 1: loop order

def test_max_pool_tangents_pick_the_tied_element_xla_picks():
    # A 3x3/2 SAME pool on 6x6 pads one column: XLA visits window columns 0-1 of every row,
    # then column 2, so of tied maxima at (0, 2) and (2, 0) the tangent is (2, 0)'s.
    x, t = _ties((2, 6, 6, 2)), RNG.standard_normal((2, 6, 6, 2)).astype(np.float32)

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")

    # The tangents bit for bit; the pooled values are TF's MaxPool's (a tie of -0.0 and +0.0
    # gives either: see test_max_and_min_order_negative_zero_below_positive_zero).
    _exact(lambda x, t: jax.jvp(pool, (x,), (t,))[1], x, t)
    _exact(lambda x, t: jax.jvp(pool, (x,), (t,))[1], x, t,
           polymorphic_shapes=["b, 6, 6, 2"] * 2)
    _exact(jax.jacfwd(lambda x: pool(x).sum()), x[:1, :, :, :1])


def test_tie_order_under_symbolic_padded_sizes_is_refused():
    x = _ties((2, 6, 6, 2))
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    program = lowered(lambda x, t: jax.jvp(pool, (x,), (t,))[1], [x, x],
                      ["b, h, w, 2", "b, h, w, 2"])
    spec = tf.TensorSpec([None, None, None, 2], tf.float32)
    graph = tf.function(lambda x, t: plain.run_program(program, [x, t]), autograph=False)
    with pytest.raises(plain.PlainLoweringError, match="order of the window's elements"):
        graph.get_concrete_function(spec, spec)
    # Eagerly (or with static sizes) XLA's order is known, and the tangents are JAX's.
    want = jax.jit(lambda x, t: jax.jvp(pool, (x,), (t,))[1])(x, x)
    np.testing.assert_array_equal(plain.run_program(program, [tf.constant(x)] * 2)[0], want)


# ------------------------------------------------------------------------ 2: reduce_precision

def test_reduce_precision_flushes_what_the_target_cannot_hold_normally():
    # 6.1e-5 and 4.5e-5 lie below float16's smallest normal (6.1035e-5): XLA gives 0.
    x = np.array([6.1e-5, 4.5e-5, -4.5e-5, 3e-5, 1e-3, 7e-5, 65504, 65520, 70000, 1e-8,
                  -0.0, np.inf, -np.inf, np.nan, 1.0001, 3.14159], np.float32)
    _exact(lambda x: (lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
                      lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7),
                      lax.reduce_precision(x, exponent_bits=4, mantissa_bits=3)), x)
    # float16 keeps its own subnormals at 5 exponent bits; bfloat16 rounds in its own bits.
    _exact(lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=4),
           np.array([6e-8, 3e-5, -4.5e-5, 1.0009765, 65504], np.float16))
    _exact(lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=2),
           x.astype(BF16), polymorphic_shapes=["b"])


# ------------------------------------------------------------------------ 3: scatter multiply

def test_scatter_multiply_applies_duplicate_updates_one_by_one():
    # 1e-20 * 1e20 * 1e30 * 1e-30 is 1 in XLA's order; the product of the updates first is inf.
    x = np.array([1e-20, 2.0, -0.0, 3.0], np.float32)
    idx = np.array([0, 0, 0, 1, 2, 0])
    u = np.array([1e20, 1e30, 1e-30, 3.0, 5.0, 0.5], np.float32)
    _exact(lambda x, u: x.at[idx].mul(u), x, u)
    _exact(lambda x, u: x.at[idx].mul(u), (x + 1).astype(np.float16),
           (u / 1e25 + 0.5).astype(np.float16))
    _exact(lambda x, u: x.at[idx].mul(u), (x + 1j).astype(np.complex64),
           (u + 1j * u[::-1]).astype(np.complex64))
    _exact(lambda x, u: x.at[idx].mul(u), np.array([3, 4, 5, 6], np.int32),
           np.array([7, 11, 13, 2, 3, -1], np.int32))


# ------------------------------------------------------------------------ 4: complex sign

def test_complex_sign_of_tiny_numbers():
    # TF's complex Sign squares |z| and gives 0 below |z| ~ 1e-19.
    z = np.array([1e-20 + 1e-20j, 3e-30 - 4e-30j, 1e-37j, 0j, complex(-0.0, -0.0),
                  complex(-0.0, 0.0), 1 + 1j, 3 - 4j, 1e30 + 1e30j, 1e38 - 3e38j], np.complex64)
    random = (RNG.standard_normal(64) + 1j * RNG.standard_normal(64)) * 10.0 ** RNG.integers(
        -30, 30, 64)
    _exact(jnp.sign, np.concatenate([z, random.astype(np.complex64)]),
           polymorphic_shapes=["b"])


# ------------------------------------------------------------------------ 5: sign

@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_sign_of_negative_zero_and_subnormals(dtype):
    # XLA treats f32/bf16 subnormals as zeros (a signed zero); f16 runs in f32 and keeps them.
    x = np.array([-0.0, 0.0, -1e-40, 1e-40, -6e-8, 6e-8, -1.0, 2.0, np.nan, -np.inf],
                 np.float32).astype(dtype)
    zeros = np.array([-0.0, 0.0], dtype)
    _exact(lambda x, z: (jnp.sign(x), jnp.cbrt(z), jnp.arcsinh(z)), x, zeros)


# ------------------------------------------------------------------------ 6: sums

def test_sums_that_overflow_are_infinite_as_in_xla():
    # A sum or product whose exact value is out of range is inf in every order. Partial
    # sums that overflow in XLA's order only are order-dependent (docs/plain_ops.md).
    x = np.array([3e38, 3e38, 1.0, -2.0], np.float32)
    _exact(lambda x: (jnp.sum(x), jnp.prod(x), jnp.sum(-x), jnp.sum(x[None], axis=1)), x)


# ------------------------------------------------------------------------ 7: scans

@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32], ids=["f16", "bf16", "f32"])
def test_cumulative_sums_round_as_xlas_tree(dtype):
    # XLA rewrites scans past 16 as a tree of 16-wide scans; a sequential float16 cumsum of
    # 300 elements drifts 13 ulps from it.
    x = RNG.standard_normal(300).astype(dtype)
    y = (1 + 0.01 * RNG.standard_normal((37, 3))).astype(dtype)
    _exact(lambda x, y: (jnp.cumsum(x), lax.cumsum(x, reverse=True), jnp.cumsum(x[:16]),
                         jnp.cumsum(x[:17]), jnp.cumprod(y, axis=0),
                         lax.cumprod(y, axis=0, reverse=True)), x, y)


def test_cumulative_sum_gradient_and_long_scans():
    x = RNG.standard_normal((2, 1000)).astype(np.float32)
    _exact(lambda x: (jnp.cumsum(x, axis=1), jax.grad(lambda x: jnp.sum(jnp.cumsum(
        x, axis=1) ** 2))(x)), x, polymorphic_shapes=["b, 1000"])


# ------------------------------------------------------------------------ 8: complex products

def test_complex64_products_round_and_overflow_as_xlas_fused_multiply_adds():
    a = np.array([1e30 + 1e30j, 3e38 + 3e38j, 3e38 - 3e38j, 1 + 2j], np.complex64)
    b = np.array([1e30 + 1e30j, 2 + 2j, 2 + 2j, 3 + 4j], np.complex64)
    random = (RNG.standard_normal((2, 256)) + 1j * RNG.standard_normal((2, 256))).astype(
        np.complex64)
    _exact(lambda a, b: (a * b, a * a, jnp.square(a)), np.concatenate([a, random[0]]),
           np.concatenate([b, random[1]]), polymorphic_shapes=["n", "n"])


def test_complex128_products_that_overflow_give_xlas_infinities():
    # XLA's fused multiply-adds keep an infinite term where the other product only overflows:
    # (inf + 2**31 j)(DBL_MAX - 3.62j) has imaginary part -inf under jax.jit; TF's product
    # (inf * -3.62 + 2**31 * DBL_MAX = -inf + inf) gave NaN. Found by the fuzzer's CI slice.
    rng = np.random.default_rng(128)
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.7976931348623157e308, 1e300,
                        -1e300, 2.0, -3.5, 1e155, 2147483648.0])
    parts = [np.where(rng.random(4000) < 0.5, rng.choice(special, 4000),
                      rng.standard_normal(4000) * 10.0 ** rng.integers(-5, 300, 4000))
             for _ in range(4)]
    x, y = (np.empty(4000, np.complex128) for _ in range(2))
    (x.real, x.imag), (y.real, y.imag) = parts[:2], parts[2:]
    x[0], y[0] = complex(np.inf, 2147483648.0), complex(1.7976931348623157e308, -3.62)
    with jax.enable_x64(True):
        for f in (lambda a, b: a * b, lambda a, b: a.at[jnp.zeros(4, int)].multiply(b[:4])):
            want = np.asarray(jax.jit(f)(x, y))
            got = plain.run_program(lowered(f, (x, y)), [tf.constant(x), tf.constant(y)])[0]
            assert exactness.compare(got.numpy(), want, exactness.tolerance("complex_arith"),
                                     np.abs(x[:len(want)]) * np.abs(y[:len(want)])).passed


# ------------------------------------------------------------------------ 9: optimizer

def test_signed_zeros_survive_tfs_graph_optimizer():
    x = np.array([0.0, -0.0, 1.0, -2.0, np.inf, np.nan], np.float32)
    arithmetic = lambda x: (0.0 - x, x + 0.0, -0.0 - x, x - (-0.0), x * 1.0, x * -1.0,
                            jnp.zeros_like(x) - x)
    _exact(arithmetic, x)
    _exact(arithmetic, x, polymorphic_shapes=["b"])
    z = -np.zeros((2, 5, 5, 3), np.float32)
    pools = lambda z: (lax.reduce_window(z, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"),
                       lax.reduce_window(z[0, 0, :, 0], 0.0, lax.add, (3,), (1,), "SAME"),
                       jnp.cumsum(z, axis=1), jnp.sum(z, axis=(1, 2)))
    _exact(pools, z)
    _exact(pools, z, polymorphic_shapes=["b, 5, 5, 3"])


# ------------------------------------------------------------------------ 11: max/min

def test_max_and_min_order_negative_zero_below_positive_zero():
    x = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, -1.0, 1e-40, -1e-40], np.float32)
    y = np.array([0.0, -0.0, -0.0, 0.0, 0.0, -0.0, -0.0, 0.0], np.float32)
    elementwise = lambda x, y: (jnp.maximum(x, y), jnp.minimum(x, y), jnp.maximum(y, x),
                                jnp.minimum(y, x), jnp.clip(x, 0.0, 1.0),
                                jnp.clip(x, -1.0, -0.0), jnp.maximum(x, -0.0),
                                jnp.minimum(x, 0.0))
    _exact(elementwise, x[:6], y[:6])
    _exact(elementwise, x[:6], y[:6], polymorphic_shapes=["b", "b"])
    # jax.nn.relu is Maximum(x, 0) in TF and TF's Relu for TFLite and TF.js (which fuse it
    # into the convolution before it): equal values, NaN kept, but the sign of a zero result
    # is the kernel's (Relu's scalar tail gives -0.0 for -0.0), a difference the contract lists.
    got_relu = tf.function(lambda v: plain.run_program(lowered(jax.nn.relu, (x,)), [v]))(x)[0]
    np.testing.assert_array_equal(got_relu.numpy(), np.asarray(jax.nn.relu(x)))
    # Subnormals are zeros to XLA: max(1e-40, -0.0) is +0.0.
    _exact(lambda x, y: (jnp.maximum(x, y), jnp.minimum(x, y)), x[6:], y[6:])
    z = _ties((2, 6, 6, 3))
    _exact(lambda z: (jnp.max(z, axis=(1, 2)), jnp.min(z, axis=(1, 2)),
                      lax.cummax(z, axis=1), lax.cummin(z, axis=2),
                      z[:, 0, 0].at[jnp.array([0, 0, 1, 1])].max(z[0, 1:5, 1]),
                      z[:, 0, 0].at[jnp.array([0, 0, 1, 1])].min(z[0, 1:5, 1])), z)
    # Max pooling is TF's MaxPool (what TFLite, TF.js and Core ML pool with): equal values and
    # NaN, but where -0.0 and +0.0 tie the kernel returns either (listed in the contract).
    z[0, 0, 0, 0] = np.nan
    pools = lambda z: (lax.reduce_window(z, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                         "VALID"),
                       lax.reduce_window(z, -jnp.inf, lax.max, (1, 3, 1, 1), (1, 1, 1, 1),
                                         "SAME"))
    got = tf.function(lambda v: plain.run_program(lowered(pools, (z,)), [v]))(z)
    for g, w in zip(got, pools(z)):
        np.testing.assert_array_equal(g.numpy(), np.asarray(w))


@pytest.mark.parametrize("activation", [jax.nn.relu, jax.nn.relu6], ids=["relu", "relu6"])
def test_a_layers_relu_keeps_nan_where_grappler_would_fuse_it(activation):
    # With a polymorphic batch, Grappler's remapper fused Conv2D/MatMul + bias + Relu into
    # oneDNN's kernel, whose ReLU made NaN 0 (72 NaNs under jax.jit, none in the tf.function).
    # Plain graphs write the ReLU as Maximum(x, 0), which no remapper pattern takes.
    w = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    w2, b = RNG.standard_normal((12, 4)).astype(np.float32), np.float32([0.5, -1, 2, 0])
    conv = lambda x: activation(lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b)
    dense = lambda x: activation(x.reshape(x.shape[0], -1)[:, :12] @ w2 + b)
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    x[0, 2, 3, 1], x[0, 0, 1, 1], x[1, 4, 4, 0] = np.nan, np.nan, np.inf
    for f in (conv, dense):
        want = np.asarray(jax.jit(f)(x))
        assert np.isnan(want).any()
        converted = jax2tf_native.convert(f, polymorphic_shapes=["b, 6, 6, 3"],
                                          enable_xla=False)
        graph = tf.function(converted, autograph=False,
                            input_signature=[tf.TensorSpec([None, 6, 6, 3], tf.float32)])
        got = graph(tf.constant(x)).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------ folded operands

def test_an_op_that_returns_its_broadcast_operand_keeps_the_full_shape():
    # Threefry's counters are constants folded to splats and broadcasts; `0 + broadcast(k)`
    # and `1 * broadcast(row)` return the other operand, which must still be broadcast to
    # the result's shape (once a scalar or a (1, 4, 1) source: a shape error in a graph).
    key = np.array([1, 2], np.uint32)
    sample = lambda k: (jax.random.randint(jax.random.wrap_key_data(k), (3, 4, 1), -5, 7),
                        jax.random.key_data(jax.random.split(jax.random.wrap_key_data(k), 3)))
    _exact(sample, key)
    row = np.arange(4, dtype=np.uint64).reshape(1, 4, 1)
    with jax.enable_x64(True):
        _exact(lambda r: (jnp.broadcast_to(r, (3, 4, 1)) * jnp.ones((3, 4, 1), np.uint64),
                          jnp.zeros((2,), np.uint32) + r[0, 0, 0].astype(np.uint32)), row)


def test_one_over_x_is_a_division_not_tfs_reciprocal_kernel():
    # TF's graph optimizer turns 1 / y into Reciprocal, whose float32 CPU kernel is 3 ulps
    # off for ordinary y and 4,907 ulps for |y| > 2**100 (-4.353222e37: -2.2964614e-38
    # where the division gives -2.297149e-38).
    bits = RNG.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    y = np.concatenate([np.float32([-4.353222e37, 2.696099e36, 3.0, 0.0, -0.0, np.inf,
                                    -np.inf, np.nan, 1e-40, -1e-40]), bits.view(np.float32)])
    inverses = lambda y: (1.0 / y, lax.div(jnp.ones_like(y), y), lax.integer_pow(y, -2),
                          jnp.reciprocal(y))
    _exact(inverses, y)
    _exact(inverses, y, polymorphic_shapes=["b"])


def test_one_over_nan_keeps_the_nans_sign_for_top_k():
    # top_k ranks in total order, where -NaN is below every number: 1 / NaN written
    # -(-1 / y) gave -NaN, so top_k picked 1.0 where jax.jit picks the NaN (found by the fuzzer).
    y = np.float32([[1.0, np.nan, 2.0, -np.nan], [np.nan, -np.nan, 3.0, 0.5]])
    top = lambda y: lax.top_k(lax.integer_pow(y, -2), 2)
    _exact(top, y)
    _exact(top, y, polymorphic_shapes=["b, 4"])
    got = jax2tf_native.convert(lambda y: 1.0 / y, enable_xla=False)(tf.constant(y)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(jax.jit(lambda y: 1.0 / y)(y)))


def test_folding_reads_empty_constants():
    # Gathering no rows makes empty constants inside cosh's decomposition; TF's own reader of
    # a Const (MakeNdarray) failed on them ("index can't contain negative values").
    x, none = np.array([1.0, -2.0], np.float32), np.zeros((0,), np.int32)
    _exact(lambda x, i: (lax.cosh(jnp.take(x, i, axis=0)), jnp.take(x, i, axis=0) + 1.0,
                         i + 1, x * 2.0), x, none)


def test_float64_cbrt_is_within_a_few_ulps():
    # pow(|x|, 1/3) alone was 116 ulps from jax.jit near 1e-300 (as TF's own XLA still is);
    # with its Newton step the plain lowering is within 3.
    rng = np.random.default_rng(35)
    with jax.enable_x64(True):
        x = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.integers(-300, 300, 4000),
                            [2.2250738585072014e-308, -7.502215062378273e-298,
                             1.7976931348623157e308, 0.0, -0.0, np.inf, -np.inf, np.nan]])
        want = np.asarray(jax.jit(lax.cbrt)(x))
        got = plain.run_program(lowered(lax.cbrt, (x,)), [tf.constant(x)])[0].numpy()
    finite = np.isfinite(want)
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulps.max() <= 4, (ulps.max(), x[finite][ulps.argmax()])
    np.testing.assert_array_equal(got[~finite], want[~finite])
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_two_width_changing_bitcasts_in_a_row_are_refused():
    # TF's graph optimizer merges Bitcast(Bitcast(x, uint16), uint8) into one Bitcast: the
    # result had shape [8] for JAX's [4, 2]. (jax.jit's own XLA fails on this chain too.)
    chain = lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint16),
                                               jnp.uint8)
    x = np.array([1.0, -2.5], np.float32)
    program = lowered(chain, (x,))
    graph = tf.function(lambda v: plain.run_program(program, [v]), autograph=False)
    with pytest.raises(plain.PlainLoweringError, match="width-changing bitcast of a"):
        graph.get_concrete_function(tf.TensorSpec([2], tf.float32))
    # One width change after a same-width bitcast is JAX's bits.
    _exact(lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.int32),
                                              jnp.uint8), x)


def test_complex_x_plus_x_keeps_negative_zero_parts():
    # TF's graph optimizer turns x + x into 2 * x; as a complex product its imaginary part
    # 2 * -0.0 + 0 * 0.25 is +0.0, where the sum is -0.0.
    z = np.array([1.0 + 0.0j, 0.25 - 0.0j, -0.0 - 0.0j, np.inf - 0.0j], np.complex64)
    z.imag = np.array([0.0, -0.0, -0.0, -0.0], np.float32)
    _exact(lambda z: (z + z, lax.add(z, z) * 1), z)
    _exact(lambda z: z + z, z, polymorphic_shapes=["b"])
