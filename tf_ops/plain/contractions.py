"""Contractions as TF ops: `dot_general` as a batched matmul, `convolution` as TF's Conv2D,
Conv3D and DepthwiseConv2dNative.

dot_general: batch and contracting dimensions in any position are transposed and reshaped to
[batch, free, contract] x [batch, contract, free] (sizes read at run time where symbolic).
Operands are converted to the result type first, as XLA does with a preferred element type;
f16/bf16 results accumulate in float32 and round once. TF's MatMul has no 8/16-bit or unsigned
integer kernels: those run in int32 (or the same-width signed type), whose wrapped products and
sums have the result's bits. Booleans: a count of true products, then `> 0`. `precision_config`
and `algorithm` are ignored: XLA's CPU backend computes at full precision anyway.

convolution: every layout is transposed to NHWC / HWIO and back; lhs dilation inserts zeros,
padding pads zeros (negative padding crops), window reversal reverses the kernel, rhs dilation
and strides go to TF's op. One spatial dimension (or none) runs as 2-D with unit dimensions.
Feature groups: depthwise (one input feature per group) as DepthwiseConv2dNative (2-D), else one
convolution per group, concatenated (TF's grouped Conv2D exists only with oneDNN or on GPU).
Batch groups: one convolution per group of the batch, concatenated along the output features,
as the StableHLO spec defines them. Complex convolutions run as four real ones. Integer
convolutions (TF's portable kernels have none) run as an integer matmul of the input's patches,
wrapping like XLA; boolean ones are refused.
"""
from __future__ import annotations

import functools
import itertools
import operator

import tensorflow as tf

from tf_ops.plain import dtype_support as ds
from tf_ops.plain.program import Op
from tf_ops.plain.windowed_view import (dilate_and_pad, dim_sizes, is_int, max0,
                                        static_or_unstacked, vector)


def _dtype(op: Op) -> tf.DType:
    return tf.as_dtype(op.result_types[0].dtype)


def _product(sizes) -> int | tf.Tensor:
    return functools.reduce(operator.mul, sizes, 1)


def _reshape(x: tf.Tensor, sizes) -> tf.Tensor:
    """`x` reshaped to `sizes` (ints or int32 scalars); with one size unknown, -1 there,
    unless a known size is 0: TF then infers 0 for the -1 (an outer product of an empty
    `[0, 2]` and a `[a]` came out `[0, 2, 0]`)."""
    unknown = [i for i, s in enumerate(sizes) if not isinstance(s, int)]
    if not unknown or (len(unknown) == 1 and all(s != 0 for s in sizes if isinstance(s, int))):
        return tf.reshape(x, [-1 if i in unknown else s for i, s in enumerate(sizes)])
    return tf.reshape(x, tf.stack([tf.cast(s, tf.int32) for s in sizes]))


def _transpose(x: tf.Tensor, perm) -> tf.Tensor:
    perm = list(perm)
    return x if perm == list(range(len(perm))) else tf.transpose(x, perm)


# ------------------------------------------------------------------------ dot_general

def _matmul_type(result: tf.DType) -> tf.DType:
    """The type TF's MatMul computes a `result`-typed dot in with the same value/bits."""
    if result in (tf.float16, tf.bfloat16):
        return tf.float32
    if result in (tf.int8, tf.int16, tf.uint8, tf.uint16, tf.bool):
        return tf.int32
    if result == tf.uint32:
        return tf.int32
    if result == tf.uint64:
        return tf.int64
    return result


def _to_matmul_type(x: tf.Tensor, result: tf.DType, compute: tf.DType) -> tf.Tensor:
    if result == tf.bool:
        return tf.cast(x, compute)
    if x.dtype != result:
        x = tf.cast(x, result)  # XLA converts operands to the result type before multiplying
    if result in (tf.uint32, tf.uint64):
        return ds.as_signed(x)
    return tf.cast(x, compute) if x.dtype != compute else x


def _from_matmul_type(y: tf.Tensor, result: tf.DType) -> tf.Tensor:
    if result == tf.bool:
        return tf.greater(y, 0)
    if result in (tf.uint32, tf.uint64):
        return ds.bitcast_back(y, result)
    return tf.cast(y, result) if y.dtype != result else y  # int32 -> int8 keeps the low bits


def check_dot_general(op: Op) -> str | None:
    for t in op.operand_types + op.result_types:
        if t.dtype is None or tf.as_dtype(t.dtype) not in (
                ds.INTEGERS + ds.FLOATS + ds.COMPLEX + (tf.bool,)):
            return f"no TF matmul for element type {t.element}"
    return None


def dot_general(ctx, op: Op, lhs, rhs):
    numbers = op.attr("dot_dimension_numbers")
    lhs_batch = list(numbers["lhs_batching_dimensions"])
    rhs_batch = list(numbers["rhs_batching_dimensions"])
    lhs_contract = list(numbers["lhs_contracting_dimensions"])
    rhs_contract = list(numbers["rhs_contracting_dimensions"])
    return _rounded(ctx, op, _dot(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                                  _dtype(op)))


def dot(ctx, op: Op, lhs, rhs):
    """stablehlo.dot: vector/matrix products contracting lhs's last and rhs's first dim."""
    return _rounded(ctx, op, _dot(lhs, rhs, [], [], [lhs.shape.rank - 1], [0], _dtype(op)))


def _rounded(ctx, op: Op, y: tf.Tensor) -> tf.Tensor:
    """The product `y` (in its compute type) as the op's result type; a bfloat16 result's
    float32 value is kept for a convert to float32 (`Context.unrounded`)."""
    result = _dtype(op)
    if result == tf.bfloat16:
        ctx.keep_unrounded(op.results[0], lambda: y)
    return _from_matmul_type(y, result)


def _dot(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, result: tf.DType):
    """The product in `_matmul_type(result)`."""
    compute = _matmul_type(result)
    lhs = _to_matmul_type(lhs, result, compute)
    rhs = _to_matmul_type(rhs, result, compute)
    lhs_free = [d for d in range(lhs.shape.rank) if d not in lhs_batch + lhs_contract]
    rhs_free = [d for d in range(rhs.shape.rank) if d not in rhs_batch + rhs_contract]
    lhs_sizes, rhs_sizes = lhs.shape.as_list(), rhs.shape.as_list()
    if 0 in [lhs_sizes[d] for d in lhs_contract] + [rhs_sizes[d] for d in rhs_free]:
        # An empty sum (0) or no output columns: no MatMul. Grappler fuses a MatMul and the
        # BiasAdd after it into oneDNN's kernel, which aborts the process when either is 0
        # ("could not create a primitive descriptor for the inner product").
        sizes = dim_sizes(lhs), dim_sizes(rhs)
        shape = ([sizes[0][d] for d in lhs_batch + lhs_free] + [sizes[1][d] for d in rhs_free])
        return tf.zeros(vector(shape), compute)
    y = _dense_matmul(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                      lhs_free, rhs_free)
    if y is None:
        y = _batched_matmul(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                            lhs_free, rhs_free)
    return y


def _dense_matmul(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, lhs_free,
                  rhs_free):
    """x @ w as a TF engineer writes it (a Dense layer): no batch dimensions, one contracting
    dimension, `w` 2-D. MatMul for 2-D `x`, BatchMatMulV2 (which broadcasts `w`) for more
    dimensions; the transposes only where `x` or `w` is stored the other way round."""
    if lhs_batch or rhs_batch or len(lhs_contract) != 1 or rhs.shape.rank != 2 \
            or lhs.shape.rank < 1 or lhs_contract != [lhs.shape.rank - 1]:
        return None
    if lhs.shape.rank == 1:
        return None
    transpose_b = rhs_contract == [1]
    return tf.linalg.matmul(lhs, rhs, transpose_b=transpose_b)


def _batched_matmul(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, lhs_free,
                    rhs_free):
    """The general dot_general: both operands as [batch..., free, contract] (sizes merged by
    reshapes only where there are several free or contracting dimensions), one batched
    matmul, then the result's dimensions split back."""
    a = _transpose(lhs, lhs_batch + lhs_free + lhs_contract)
    b = _transpose(rhs, rhs_batch + rhs_free + rhs_contract)
    if len(lhs_free) == 1 and len(rhs_free) == 1 and len(lhs_contract) == 1:
        return tf.linalg.matmul(a, b, transpose_b=True)  # batch dims as they are
    lhs_sizes, rhs_sizes = dim_sizes(lhs), dim_sizes(rhs)
    batch = [lhs_sizes[d] for d in lhs_batch]
    m = [lhs_sizes[d] for d in lhs_free]
    n = [rhs_sizes[d] for d in rhs_free]
    k = [lhs_sizes[d] for d in lhs_contract]
    a = _reshape(a, batch + [_product(m), _product(k)])
    b = _reshape(b, batch + [_product(n), _product(k)])
    y = tf.linalg.matmul(a, b, transpose_b=True)
    return _reshape(y, batch + m + n)


# ------------------------------------------------------------------------ convolution

def check_convolution(op: Op) -> str | None:
    for t in op.operand_types + op.result_types:
        if t.dtype is None or tf.as_dtype(t.dtype) not in ds.FLOATS + ds.COMPLEX + ds.INTEGERS:
            return f"no exact TF convolution for element type {t.element}"
    spatial = len(op.attr("dimension_numbers")["input_spatial_dimensions"])
    if spatial > 3:
        return f"{spatial} spatial dimensions (TF convolves at most 3)"
    kernel = op.operand_types[1]
    if tf.as_dtype(kernel.dtype) in ds.INTEGERS and any(
            kernel.shape[d] is None
            for d in op.attr("dimension_numbers")["kernel_spatial_dimensions"]):
        return ("an integer kernel whose window size is symbolic (integer convolutions are "
                "one slice per window position, so their number must be known at conversion)")
    result = op.result_types[0]
    if (0 in op.operand_types[1].shape or 0 in result.shape) \
            and any(result.shape[d] is None for d in
                    op.attr("dimension_numbers")["output_spatial_dimensions"]):
        return ("an empty kernel or result with a symbolic output size (TF's kernels reject "
                "empty filters)")
    return None


def convolution(ctx, op: Op, lhs, rhs):
    n = len(op.attr("dimension_numbers")["input_spatial_dimensions"])
    padding = op.attr("padding")
    padding = [[int(lo), int(hi)] for lo, hi in padding] if padding is not None \
        else [[0, 0]] * n
    return _convolution(ctx, op, lhs, rhs, padding)


def dynamic_conv(ctx, op: Op, lhs, rhs, padding):
    """A convolution whose padding ([spatial, 2] ints) is computed at run time (JAX writes it
    for SAME padding of symbolic sizes)."""
    return _convolution(ctx, op, lhs, rhs,
                        [static_or_unstacked(row) for row in tf.unstack(padding)])


def _convolution(ctx, op: Op, lhs, rhs, padding):
    numbers = op.attr("dimension_numbers")
    result = _dtype(op)
    result_type = op.result_types[0]
    n = len(numbers["input_spatial_dimensions"])
    # To [batch, spatial..., feature] and [spatial..., in, out].
    lhs = _transpose(lhs, [numbers["input_batch_dimension"], *numbers["input_spatial_dimensions"],
                           numbers["input_feature_dimension"]])
    rhs = _transpose(rhs, [*numbers["kernel_spatial_dimensions"],
                           numbers["kernel_input_feature_dimension"],
                           numbers["kernel_output_feature_dimension"]])
    out_perm = [numbers["output_batch_dimension"], *numbers["output_spatial_dimensions"],
                numbers["output_feature_dimension"]]
    if 0 in result_type.shape or 0 in rhs.shape.as_list():
        # An empty result, or an empty sum (TF's kernels reject empty filters).
        return _zeros_result(lhs, rhs, result_type, out_perm)
    attrs = dict(
        strides=list(op.attr("window_strides", None) or [1] * n),
        padding=padding,
        lhs_dilation=list(op.attr("lhs_dilation", None) or [1] * n),
        rhs_dilation=list(op.attr("rhs_dilation", None) or [1] * n),
        reversal=list(op.attr("window_reversal", None) or [False] * n),
        feature_groups=op.attr("feature_group_count", 1),
        batch_groups=op.attr("batch_group_count", 1))
    if result in ds.COMPLEX:
        y = _complex_conv(lhs, rhs, attrs, result)
    elif result in ds.INTEGERS:
        # TF's integer Conv2D is oneDNN-only and Conv3D has none: patches times an int
        # matmul, whose wrapped sums have the result's bits (as for dot_general).
        compute = _matmul_type(result)
        y = _conv_nhwc(_to_matmul_type(lhs, result, compute),
                       _to_matmul_type(rhs, result, compute), attrs)
        y = _from_matmul_type(y, result)
    else:
        compute = ds.float_compute_type(result)
        y = _conv_nhwc(tf.cast(lhs, compute), tf.cast(rhs, compute), attrs)
        if result == tf.bfloat16:  # for a convert to float32 (`Context.unrounded`)
            wide = y
            ctx.keep_unrounded(op.results[0], lambda: _transpose(wide, _inverse(out_perm)))
        y = tf.cast(y, result) if y.dtype != result else y
    return _transpose(y, _inverse(out_perm))


def _inverse(permutation: list) -> list:
    inverse = [0] * len(permutation)
    for i, d in enumerate(permutation):
        inverse[d] = i
    return inverse


def _zeros_result(lhs, rhs, result_type, out_perm):
    dtype = tf.as_dtype(result_type.dtype)
    shape = list(result_type.shape)
    if any(d is None for d in shape):
        # Only the batch (from lhs) and output features (from rhs) can be symbolic here:
        # check_convolution refuses symbolic spatial sizes with an empty kernel or result.
        batch_dim = out_perm[0]
        shape[batch_dim] = tf.shape(lhs, out_type=tf.int32)[0] if shape[batch_dim] is None \
            else shape[batch_dim]
        shape = tf.stack([tf.cast(s, tf.int32) if s is not None
                          else tf.shape(rhs, out_type=tf.int32)[-1] for s in shape])
    return tf.zeros(shape, dtype)


def _complex_conv(lhs, rhs, attrs, result):
    lhs, rhs = tf.cast(lhs, result), tf.cast(rhs, result)
    a, b = tf.math.real(lhs), tf.math.imag(lhs)
    c, d = tf.math.real(rhs), tf.math.imag(rhs)
    real = _conv_nhwc(a, c, attrs) - _conv_nhwc(b, d, attrs)
    imag = _conv_nhwc(a, d, attrs) + _conv_nhwc(b, c, attrs)
    return tf.complex(real, imag)


def _conv_nhwc(x, k, attrs):
    """A convolution of NHWC-like `x` with HWIO-like `k` (any number of spatial dims <= 3)."""
    n = x.shape.rank - 2
    if attrs["batch_groups"] > 1:
        groups = attrs["batch_groups"]
        xs = tf.split(x, groups, axis=0)
        ks = tf.split(k, groups, axis=n + 1)
        one = dict(attrs, batch_groups=1)
        return tf.concat([_conv_nhwc(xg, kg, one) for xg, kg in zip(xs, ks)], axis=n + 1)
    padding = _tf_padding(x, k, attrs)
    if padding is None:
        x = dilate_and_pad(x, tf.zeros([], x.dtype), [1, *attrs["lhs_dilation"], 1],
                           [[0, 0], *attrs["padding"], [0, 0]])
        padding = "VALID"
    if any(attrs["reversal"]):
        k = tf.reverse(k, [d for d in range(n) if attrs["reversal"][d]])
    strides, dilations = list(attrs["strides"]), list(attrs["rhs_dilation"])
    # TF's kernels are 2-D and 3-D: fewer spatial dims get unit dims in front.
    extra = 2 - n if n < 2 else 0
    if extra:
        x = _reshape(x, [dim_sizes(x)[0]] + [1] * extra + dim_sizes(x)[1:])
        k = _reshape(k, [1] * extra + dim_sizes(k))
        strides, dilations = [1] * extra + strides, [1] * extra + dilations
    x, fitted = _fit_window(x, k, strides, dilations) if padding == "VALID" else (x, None)
    groups = attrs["feature_groups"]
    if groups == 1:
        y = _tf_conv(x, k, strides, dilations, padding=padding)
    elif k.shape[-2] == 1 and len(strides) == 2 and x.shape[-1] == groups \
            and x.dtype.is_floating:
        # Depthwise: XLA's output feature g*M + m is TF's channel g, multiplier m.
        sizes = dim_sizes(k)
        k = _reshape(k, sizes[:2] + [groups, sizes[-1] // groups])
        y = _tf_conv(x, k, strides, dilations, depthwise=True, padding=padding)
    else:
        xs = tf.split(x, groups, axis=-1)
        ks = tf.split(k, groups, axis=-1)
        y = tf.concat([_tf_conv(xg, kg, strides, dilations, padding=padding)
                       for xg, kg in zip(xs, ks)], -1)
    if fitted is not None:
        y = tf.slice(y, [0] * (len(fitted) + 2), vector([-1, *fitted, -1]))
    if extra:
        sizes = dim_sizes(y)
        y = _reshape(y, [sizes[0]] + sizes[1 + extra:])
    return y


def _fit_window(x, k, strides, dilations):
    """XLA's VALID convolution over a spatial size smaller than the dilated window is empty;
    TF's kernels raise instead ("Computed output size would be negative"). A graph traced with
    symbolic sizes meets this at run time (and eagerly with the sizes given): pads x at the end
    up to the window and returns (x, the true output sizes to slice the result to); (x, None)
    where every size is statically at least its window."""
    sizes = dim_sizes(x)[1:-1]
    extents = [(w - 1) * d + 1 for w, d in zip(dim_sizes(k)[:len(sizes)], dilations)]
    short = [max0(e - s) for s, e in zip(sizes, extents)]
    if all(is_int(d) and d == 0 for d in short):
        return x, None
    x = tf.pad(x, tf.stack([vector(row) for row in [[0, 0], *[[0, d] for d in short], [0, 0]]]))
    return x, [((s - e) // st + 1 if s >= e else 0) if is_int(s) and is_int(e)
               else tf.where(s >= e, max0(s - e) // st + 1, 0)
               for s, e, st in zip(sizes, extents, strides)]


def _tf_padding(x, k, attrs) -> str | None:
    """"SAME" or "VALID" when TF's padding of that name is the convolution's zero padding
    (static spatial sizes, no input dilation, one spatial layout TF's kernels take), so the
    kernel pads by itself as in a hand-written model; else None (padded explicitly)."""
    n = x.shape.rank - 2
    if x.dtype.is_integer or any(d != 1 for d in attrs["lhs_dilation"]) \
            or attrs["batch_groups"] != 1 or n not in (2, 3):
        return None
    pads = [list(p) for p in attrs["padding"]]
    if all(isinstance(v, int) and v == 0 for p in pads for v in p):
        return "VALID"
    if any(not isinstance(v, int) for p in pads for v in p):
        return None
    if n == 3 or any(d != 1 for d in attrs["rhs_dilation"]) \
            or (attrs["feature_groups"] != 1 and len(set(attrs["strides"])) != 1):
        return None  # Conv3D, dilated and unevenly strided grouped ones keep the explicit route
    sizes, window = x.shape.as_list()[1:-1], k.shape.as_list()[:n]
    if any(v is None for v in sizes + window):
        return None
    for size, extent, stride, pad in zip(sizes, window, attrs["strides"], pads):
        out = -(-size // stride)
        total = max((out - 1) * stride + extent - size, 0)
        if pad != [total // 2, total - total // 2]:
            return None
    return "SAME"


def _tf_conv(x, k, strides, dilations, depthwise=False, padding="VALID"):
    """A convolution with TF's portable (Eigen) CPU kernels' limits: Conv2D takes strides
    and dilations; Conv3D and DepthwiseConv2dNative take no dilations (only oneDNN's float32
    kernels do), depthwise strides must be equal. What a kernel lacks is done around it:
    dilation by space-to-batch (as tf.nn.convolution does), strides by subsampling. `padding`
    is TF's ("SAME" only where `_tf_padding` found it to be the convolution's)."""
    n = len(strides)
    if x.dtype.is_integer:
        return _patch_conv(x, k, strides, dilations)
    if n == 2 and not depthwise:
        return tf.raw_ops.Conv2D(input=x, filter=k, strides=[1, *strides, 1], padding=padding,
                                 dilations=[1, *dilations, 1])

    def conv(inp, s):
        if depthwise:
            return tf.raw_ops.DepthwiseConv2dNative(input=inp, filter=k, strides=[1, *s, 1],
                                                    padding=padding)
        return tf.raw_ops.Conv3D(input=inp, filter=k, strides=[1, *s, 1], padding=padding)

    dilated = any(d != 1 for d in dilations)
    direct = list(strides) if not dilated and (not depthwise or len(set(strides)) == 1) \
        else [1] * n
    if padding != "VALID" and direct != list(strides):
        raise AssertionError("SAME padding only where the kernel takes the strides")
    if dilated:
        y = tf.nn.with_space_to_batch(x, list(dilations), "VALID",
                                      lambda inp, num_spatial_dims, padding: conv(inp, direct))
    else:
        y = conv(x, direct)
    if direct != list(strides):
        y = y[(slice(None),) + tuple(slice(None, None, s) for s in strides)]
    return y


def _patch_conv(x, k, strides, dilations):
    """A VALID convolution as one matmul of the input's patches (one strided slice per kernel
    position, in the kernel's row-major order) with the kernel as [positions * in, out]."""
    n = len(strides)
    sizes = dim_sizes(x)
    kernel = k.shape.as_list()[:n]
    spans = []
    for size, extent, dilation in zip(sizes[1:-1], kernel, dilations):
        span = size - (extent - 1) * dilation
        spans.append(max(span, 0) if isinstance(span, int) else tf.maximum(span, 0))
    views = []
    for position in itertools.product(*[range(extent) for extent in kernel]):
        begin = [0] + [p * d for p, d in zip(position, dilations)] + [0]
        end = [sizes[0]] + [b + s for b, s in zip(begin[1:-1], spans)] + [sizes[-1]]
        end = end if all(isinstance(e, int) for e in end) else \
            tf.stack([tf.cast(e, tf.int32) for e in end])
        views.append(tf.strided_slice(x, begin, end, [1, *strides, 1]))
    patches = tf.stack(views, axis=-2)
    out = dim_sizes(views[0])[:-1]
    features = len(views) * sizes[-1]
    out_features = dim_sizes(k)[-1]  # a symbolic feature count is read at run time
    y = tf.linalg.matmul(_reshape(patches, [_product(out), features]),
                         _reshape(k, [features, out_features]))
    return _reshape(y, out + [out_features])
