"""dot_general and convolution lowered to plain TF ops, against JAX: batch/contracting dims in
any position, integer wrap-around, narrow floats, every convolution layout and option JAX's
layers use (strides, dilations, padding, groups, transposed, gradients), symbolic batch."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered
from tf_ops import plain

RNG = np.random.default_rng(0)


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_attention_einsums_with_symbolic_batch():
    q, k = _normal(2, 3, 4, 5), _normal(2, 6, 4, 5)
    types = assert_lowers_like_jax(
        lambda q, k: jnp.einsum("bhqk,bkhd->bqhd", jnp.einsum("bqhd,bkhd->bhqk", q, k), k),
        q, k, polymorphic_shapes=["b, 3, 4, 5", "b, 6, 4, 5"], rtol=1e-5, atol=1e-5)
    assert "BatchMatMulV2" in types


def test_integer_dots_wrap_like_xla():
    a = RNG.integers(-128, 127, (3, 70), dtype=np.int8)
    b = RNG.integers(-128, 127, (70, 2), dtype=np.int8)
    assert_lowers_like_jax(
        lambda a, b: (a @ b,  # int8 sums wrap at 8 bits
                      jax.lax.dot(a, b, preferred_element_type=jnp.int32)), a, b)
    ua = RNG.integers(0, 2**32, (4, 5), dtype=np.uint32)
    ub = RNG.integers(0, 2**32, (5, 3), dtype=np.uint32)
    assert_lowers_like_jax(jnp.matmul, ua, ub)
    ba, bb = RNG.random((3, 4)) > 0.5, RNG.random((4, 2)) > 0.5
    assert_lowers_like_jax(lambda a, b: jax.lax.dot(a, b), ba, bb)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_float_dots(dtype):
    a, b = _normal(2, 3, 8, dtype=dtype), _normal(2, 8, 4, dtype=dtype)
    assert_lowers_like_jax(
        lambda a, b: (a @ b, jax.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))),
                                                 preferred_element_type=jnp.float32)),
        a, b, rtol=1e-2, atol=1e-2)


def test_complex_and_f64_dot_with_contracting_dims_in_front():
    a = (_normal(5, 3) + 1j * _normal(5, 3)).astype(np.complex64)
    b = (_normal(5, 2, 3) + 1j * _normal(5, 2, 3)).astype(np.complex64)
    assert_lowers_like_jax(
        lambda a, b: jax.lax.dot_general(a, b, (((0,), (0,)), ((), ()))), a, b,
        rtol=1e-5, atol=1e-5)


def _conv(dims, **kw):
    return lambda x, k: jax.lax.conv_general_dilated(x, k, dimension_numbers=dims, **kw)


def test_an_empty_outer_product_with_a_symbolic_size_keeps_its_shape():
    # The product's [0, a] was reshaped to [0, 2, -1], and TF infers 0 for the -1 whatever
    # `a` is: [0, 2, 0] where JAX gives [0, 2, 1] (found by the fuzzer).
    outer = lambda x, y: jax.lax.dot_general(x, y, (((), ()), ((), ())))
    for n in (1, 3):
        assert_lowers_like_jax(outer, np.zeros((0, 2), np.float32), _normal(n),
                               polymorphic_shapes=[None, "a"])
    assert_lowers_like_jax(lambda x, y: jnp.einsum("ij,bk->bijk", x, y),
                           np.zeros((0, 2), np.float32), _normal(3, 4),
                           polymorphic_shapes=[None, "b, 4"])


def test_a_dense_layer_with_no_inputs_or_no_units_gives_zeros_not_an_abort():
    # x @ w + b, then ReLU: Grappler fused the MatMul and BiasAdd into oneDNN's kernel, which
    # aborted the process (not an exception) for an empty sum or no output columns.
    layer = lambda x, w, b: jax.nn.relu(x @ w + b)
    assert_lowers_like_jax(layer, _normal(3, 0), _normal(0, 2), _normal(2))
    assert_lowers_like_jax(layer, _normal(3, 0), _normal(0, 2), _normal(2),
                           polymorphic_shapes=["b, 0", None, None])
    assert_lowers_like_jax(layer, _normal(3, 4), _normal(4, 0), _normal(0))
    assert_lowers_like_jax(lambda x, w: jnp.einsum("bij,bjk->bik", x, w).astype(jnp.int8),
                           np.ones((2, 3, 0), np.int8), np.ones((2, 0, 4), np.int8),
                           polymorphic_shapes=["b, 3, 0", "b, 0, 4"])


def test_conv_nhwc_strided_dilated_same_with_symbolic_batch():
    x, k = _normal(2, 9, 10, 4), _normal(3, 3, 4, 6)
    assert_lowers_like_jax(
        _conv(("NHWC", "HWIO", "NHWC"), window_strides=(2, 1), padding="SAME",
              rhs_dilation=(2, 3)),
        x, k, polymorphic_shapes=["b, 9, 10, 4", None], rtol=1e-5, atol=1e-5)


def test_same_padding_of_symbolic_sizes_is_a_dynamic_conv():
    x, k = _normal(2, 9, 10, 4), _normal(3, 3, 4, 6)
    conv = _conv(("NHWC", "HWIO", "NHWC"), window_strides=(2, 1), padding="SAME")
    program = lowered(conv, [x, k], ["b, h, w, 4", None])
    assert any(op.name == "stablehlo.dynamic_conv" for op in program.ops())
    assert_lowers_like_jax(lambda x, k: (conv(x, k), conv(x.astype(jnp.int32),
                                                          k.astype(jnp.int32))),
                           x, k, polymorphic_shapes=["b, h, w, 4", None], rtol=1e-5, atol=1e-4)


def test_conv_nchw_explicit_and_negative_padding_and_transposed():
    x, k = _normal(2, 3, 8, 7), _normal(5, 3, 3, 2)
    assert_lowers_like_jax(
        _conv(("NCHW", "OIHW", "NCHW"), window_strides=(1, 2), padding=((2, -1), (-1, 3))),
        x, k, rtol=1e-5, atol=1e-5)
    kt = _normal(3, 3, 3, 5)
    assert_lowers_like_jax(
        lambda x, k: jax.lax.conv_transpose(x, k, (2, 2), "SAME",
                                            dimension_numbers=("NCHW", "HWIO", "NCHW")),
        x, kt, rtol=1e-5, atol=1e-5)


def test_grouped_and_depthwise_convs_and_their_gradients():
    x = _normal(4, 8, 8, 6)
    depthwise = _conv(("NHWC", "HWIO", "NHWC"), window_strides=(2, 1), padding="SAME",
                      feature_group_count=6, rhs_dilation=(1, 2))
    grouped = _conv(("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding="VALID",
                    feature_group_count=2)
    kd, kg = _normal(3, 3, 1, 12), _normal(3, 2, 3, 4)
    assert_lowers_like_jax(lambda x, kd, kg: (depthwise(x, kd), grouped(x, kg)), x, kd, kg,
                           polymorphic_shapes=["b, 8, 8, 6", None, None],
                           rtol=1e-5, atol=1e-5)
    # The kernel gradient of a grouped conv is a batch-grouped conv.
    types = assert_lowers_like_jax(
        jax.grad(lambda x, k: jnp.sum(grouped(x, k) ** 2), argnums=(0, 1)), x, kg,
        rtol=1e-4, atol=1e-4)
    assert "Conv2D" in types
    program = lowered(jax.grad(lambda x, k: jnp.sum(grouped(x, k) ** 2), argnums=1), [x, kg])
    assert any(op.name == "stablehlo.convolution" and op.attr("batch_group_count", 1) > 1
               for op in program.ops())


def test_1d_and_3d_convs():
    x1, k1 = _normal(2, 11, 3), _normal(4, 3, 5)
    assert_lowers_like_jax(_conv(("NWC", "WIO", "NWC"), window_strides=(2,), padding="SAME",
                                 rhs_dilation=(2,)), x1, k1, rtol=1e-5, atol=1e-5)
    x3, k3 = _normal(1, 6, 7, 8, 2), _normal(2, 3, 2, 2, 3)
    assert_lowers_like_jax(_conv(("NDHWC", "DHWIO", "NDHWC"), window_strides=(1, 2, 1),
                                 padding="VALID", rhs_dilation=(2, 1, 2)),
                           x3, k3, rtol=1e-5, atol=1e-5)


def test_complex_and_narrow_float_convs():
    x = (_normal(1, 5, 5, 2) + 1j * _normal(1, 5, 5, 2)).astype(np.complex64)
    k = (_normal(2, 2, 2, 3) + 1j * _normal(2, 2, 2, 3)).astype(np.complex64)
    conv = _conv(("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding="SAME")
    assert_lowers_like_jax(conv, x, k, rtol=1e-5, atol=1e-5)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        assert_lowers_like_jax(conv, _normal(1, 5, 5, 2, dtype=dtype),
                               _normal(2, 2, 2, 3, dtype=dtype), rtol=1e-2, atol=1e-2)


def test_integer_convolutions_wrap_like_xla():
    x = RNG.integers(-128, 127, (2, 6, 5, 4), dtype=np.int8)
    k = RNG.integers(-128, 127, (3, 2, 2, 6), dtype=np.int8)
    conv = _conv(("NHWC", "HWIO", "NHWC"), window_strides=(2, 1), padding="SAME",
                 rhs_dilation=(1, 2), feature_group_count=2)
    assert_lowers_like_jax(lambda x, k: (conv(x, k), conv(x.astype(jnp.int32),
                                                          k.astype(jnp.int32))),
                           x, k, polymorphic_shapes=["b, 6, 5, 4", None])


def test_convolutions_with_a_symbolic_kernel_dimension():
    # Found by the fuzzer: a symbolic output feature count broke the integer lowering's
    # reshapes (TypeError); a symbolic window runs in float (TF's kernels take it) and is
    # refused for integers (one slice per window position).
    x = RNG.integers(-9, 9, (2, 5, 3), dtype=np.int8)
    k = RNG.integers(-9, 9, (2, 3, 4), dtype=np.int8)
    nwc = _conv(("NWC", "WIO", "NWC"), window_strides=(1,), padding="SAME")
    assert_lowers_like_jax(nwc, x, k, polymorphic_shapes=["b, 5, 3", "2, 3, o"])
    assert_lowers_like_jax(nwc, x.astype(np.float32), k.astype(np.float32),
                           polymorphic_shapes=["b, 5, 3", "w, 3, 4"])
    with pytest.raises(plain.PlainLoweringError, match=r"integer kernel whose window size is "
                                                       r"symbolic"):
        lowered(nwc, [x, k], ["b, 5, 3", "w, 3, 4"])


def test_a_symbolic_size_smaller_than_the_window_gives_an_empty_result():
    # Found by the fuzzer: TF's Conv2D raised "Computed output size would be negative" where
    # XLA's VALID convolution over a size smaller than the dilated window is empty.
    conv = _conv(("NWC", "WIO", "NWC"), window_strides=(2,), padding="VALID",
                 rhs_dilation=(2,))
    k = _normal(3, 2, 4)
    for width in (1, 9):  # narrower than the window (5) and wider
        assert_lowers_like_jax(conv, _normal(2, width, 2), k,
                               polymorphic_shapes=["b, w, 2", None])
    assert_lowers_like_jax(conv, _normal(2, 1, 2), k, polymorphic_shapes=[None, "kw, 2, 4"])


def test_boolean_convolution_is_refused_naming_the_op():
    x, k = np.ones((1, 4, 4, 1), bool), np.ones((2, 2, 1, 1), bool)
    with pytest.raises(plain.PlainLoweringError, match=r"stablehlo.convolution.*i1"):
        lowered(_conv(("NHWC", "HWIO", "NHWC"), window_strides=(1, 1), padding="VALID"),
                [x, k])


def test_stablehlo_dot_from_a_hand_written_module():
    # JAX writes dot_general only; other producers' modules may hold the older stablehlo.dot.
    text = """
    func.func public @main(%a: tensor<2x3xf32>, %v: tensor<3xf32>) -> tensor<2xf32> {
      %0 = stablehlo.dot %a, %v : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }"""
    program = plain.read_program(text)
    plain.check_program(program)
    a, v = _normal(2, 3), _normal(3)
    got = plain.run_program(program, [tf.constant(a), tf.constant(v)])[0]
    np.testing.assert_allclose(got, np.asarray(jnp.dot(a, v)), rtol=1e-6)
