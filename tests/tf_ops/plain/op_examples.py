"""Examples for every row of the plain lowering's op table (tf_ops/plain/op_table.py), each
pinning the TF op types its graph holds, as jax2onnx's test cases pin the ONNX graph of each
primitive: a lowering that grows (a kernel replaced by a decomposition, a broadcast made
explicit) fails its own example. test_op_table.py runs them against JAX.

An example is a JAX function (or, for ops JAX never writes, a StableHLO module with a numpy
reference), its inputs, and the compute op types of the `tf.function` graph (Const, Identity,
Placeholder and NoOp aside), traced with `None` for every symbolic dimension.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

lax = jax.lax
RNG = np.random.default_rng(7)
F = RNG.standard_normal((3, 4)).astype(np.float32)
G = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(F) + 0.5).astype(np.float32)
I = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
J = RNG.integers(1, 7, (3, 4)).astype(np.int32)
B = RNG.random((3, 4)) < 0.5
C = (F + 1j * G).astype(np.complex64)
IMG = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
KERNEL = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
SPD = (lambda a: (a @ a.T + 4 * np.eye(4)).astype(np.float32))(RNG.standard_normal((4, 4)))


_LAPACK_DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _lapack_array(t: str, shape) -> np.ndarray:
    dtype = _LAPACK_DTYPES[t]
    a = RNG.standard_normal(shape)
    if t in "cz":
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def _lapack_spd(t: str) -> np.ndarray:
    a = _lapack_array(t, (4, 4))
    return (a @ np.conj(a.T) + 4 * np.eye(4)).astype(_LAPACK_DTYPES[t])


# The TF op types each LAPACK call's graph holds (the kernel, and JAX's NaN for a failed
# factorization: LAPACK's info != 0).
_LAPACK_OPS = {
    'lapack_spotrf_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Cholesky': 1, 'Equal': 1, 'Fill': 1, 'Greater': 1, 'GreaterEqual': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'RealDiv': 1, 'Reshape': 1, 'SelectV2': 3, 'Transpose': 1},
    'lapack_dpotrf_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Cholesky': 1, 'Equal': 1, 'Fill': 1, 'Greater': 1, 'GreaterEqual': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'RealDiv': 1, 'Reshape': 1, 'SelectV2': 3, 'Transpose': 1},
    'lapack_cpotrf_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Cholesky': 1, 'Complex': 1, 'Equal': 1, 'Fill': 1, 'Greater': 1, 'GreaterEqual': 1, 'Imag': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'Neg': 1, 'Real': 2, 'RealDiv': 1, 'Reshape': 1, 'SelectV2': 3, 'Transpose': 1},
    'lapack_zpotrf_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Cholesky': 1, 'Complex': 1, 'Equal': 1, 'Fill': 1, 'Greater': 1, 'GreaterEqual': 1, 'Imag': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'Neg': 1, 'Real': 2, 'RealDiv': 1, 'Reshape': 1, 'SelectV2': 3, 'Transpose': 1},
    'lapack_strsm_ffi': {'MatrixTriangularSolve': 1},
    'lapack_dtrsm_ffi': {'MatrixTriangularSolve': 1},
    'lapack_ctrsm_ffi': {'MatrixTriangularSolve': 1},
    'lapack_ztrsm_ffi': {'MatrixTriangularSolve': 1},
    'lapack_ssyevd_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'IsFinite': 1, 'LogicalNot': 1, 'RealDiv': 1, 'SelectV2': 3, 'SelfAdjointEigV2': 1, 'StridedSlice': 1, 'Transpose': 1},
    'lapack_dsyevd_ffi': {'AddV2': 1, 'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'IsFinite': 1, 'LogicalNot': 1, 'RealDiv': 1, 'SelectV2': 3, 'SelfAdjointEigV2': 1, 'StridedSlice': 1, 'Transpose': 1},
    'lapack_cheevd_ffi': {'AddV2': 1, 'All': 1, 'Cast': 2, 'Complex': 1, 'Equal': 1, 'Fill': 1, 'Imag': 2, 'IsFinite': 2, 'LogicalAnd': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'MatrixSetDiagV3': 1, 'Neg': 1, 'Real': 4, 'RealDiv': 1, 'SelectV2': 3, 'SelfAdjointEigV2': 1, 'StridedSlice': 1, 'Transpose': 1},
    'lapack_zheevd_ffi': {'AddV2': 1, 'All': 1, 'Cast': 2, 'Complex': 1, 'Equal': 1, 'Fill': 1, 'Imag': 2, 'IsFinite': 2, 'LogicalAnd': 1, 'LogicalNot': 1, 'MatrixDiagPartV3': 1, 'MatrixSetDiagV3': 1, 'Neg': 1, 'Real': 4, 'RealDiv': 1, 'SelectV2': 3, 'SelfAdjointEigV2': 1, 'StridedSlice': 1, 'Transpose': 1},
    'lapack_sgesdd_ffi': {'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'IsFinite': 1, 'LogicalNot': 1, 'SelectV2': 2, 'StridedSlice': 1, 'Svd': 1},
    'lapack_dgesdd_ffi': {'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'IsFinite': 1, 'LogicalNot': 1, 'SelectV2': 2, 'StridedSlice': 1, 'Svd': 1},
    'lapack_cgesdd_ffi': {'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'Imag': 1, 'IsFinite': 2, 'LogicalAnd': 1, 'LogicalNot': 1, 'Real': 2, 'SelectV2': 2, 'StridedSlice': 1, 'Svd': 1},
    'lapack_zgesdd_ffi': {'All': 1, 'Cast': 1, 'Equal': 1, 'Fill': 1, 'Imag': 1, 'IsFinite': 2, 'LogicalAnd': 1, 'LogicalNot': 1, 'Real': 2, 'SelectV2': 2, 'StridedSlice': 1, 'Svd': 1},
}


@dataclasses.dataclass(frozen=True)
class Example:
    """One op table row exercised.

    Attributes:
      op: the row's op name ("stablehlo.add"), or "custom_call:TARGET" for a custom call row.
      tf_ops: the compute op types the graph holds (sorted names, repeats kept); None: the
        row refuses this op at conversion (PlainLoweringError).
      fn: the JAX function (None for a raw module).
      args: its inputs.
      polymorphic_shapes: per input, a shape spec ("b, 4") or None.
      module: StableHLO text, for ops JAX does not write (with `reference`).
      reference: numpy function of the inputs giving the expected outputs (raw modules).
      rtol, atol: for floats; everything else is compared exactly.
      lapack: export for CPU as JAX does by default, keeping jaxlib's LAPACK calls (the
        custom calls a plain export keeps for TF's kernels), with 64-bit types enabled.
    """
    op: str
    tf_ops: tuple[str, ...] | None
    fn: Callable | None = None
    args: tuple = ()
    polymorphic_shapes: tuple | None = None
    module: str | None = None
    reference: Callable | None = None
    rtol: float = 1e-6
    atol: float = 1e-6
    lapack: bool = False

    @property
    def id(self) -> str:
        return self.op.replace("stablehlo.", "").replace("custom_call:", "cc_")


def ex(op, tf_ops, fn=None, *inputs, poly=None, module=None, args=(), reference=None,
       rtol=1e-6, atol=1e-6, lapack=False) -> Example:
    """An Example: `fn(*inputs)`, or a raw `module` run on `args` against `reference`;
    `tf_ops` a list of op types or a dict of op type -> count."""
    if isinstance(tf_ops, dict):
        tf_ops = [name for name, count in tf_ops.items() for _ in range(count)]
    return Example(op, None if tf_ops is None else tuple(sorted(tf_ops)), fn,
                   inputs or tuple(args), poly, module, reference, rtol, atol, lapack)


_RAW_UNARY = """
func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {{
  %y = stablehlo.{op} %x : tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}}"""

_RAW_DOT = """
func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %y = stablehlo.dot %a, %b : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}"""

_RAW_IF = """
func.func public @main(%p: tensor<i1>, %x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %y = "stablehlo.if"(%p) ({
    %a = stablehlo.negate %x : tensor<3x4xf32>
    stablehlo.return %a : tensor<3x4xf32>
  }, {
    stablehlo.return %x : tensor<3x4xf32>
  }) : (tensor<i1>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}"""

_RAW_RNG = """
func.func public @main(%lo: tensor<f32>, %hi: tensor<f32>) -> tensor<3x4xf32> {
  %s = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
  %y = stablehlo.rng %lo, %hi, %s, distribution = UNIFORM
    : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}"""

_RAW_REAL_DYNAMIC_SLICE = """
func.func public @main(%x: tensor<3x4xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.constant dense<[1, 0]> : tensor<2xi32>
  %l = stablehlo.constant dense<[3, 4]> : tensor<2xi32>
  %t = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %y = stablehlo.real_dynamic_slice %x, %s, %l, %t : (tensor<3x4xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}"""
_RAW_DYNAMIC_PAD = """
func.func public @main(%x: tensor<3x4xf32>) -> tensor<?x?xf32> {
  %v = stablehlo.constant dense<0.5> : tensor<f32>
  %lo = stablehlo.constant dense<[1, 0]> : tensor<2xi32>
  %hi = stablehlo.constant dense<[0, 2]> : tensor<2xi32>
  %in = stablehlo.constant dense<[0, 1]> : tensor<2xi32>
  %y = stablehlo.dynamic_pad %x, %v, %lo, %hi, %in : (tensor<3x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}"""
_RAW_DYNAMIC_GATHER = """
func.func public @main(%x: tensor<3x4xf32>, %i: tensor<2x1xi32>) -> tensor<2x4xf32> {
  %s = stablehlo.constant dense<[1, 4]> : tensor<2xi32>
  %y = "stablehlo.dynamic_gather"(%x, %i, %s) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>} : (tensor<3x4xf32>, tensor<2x1xi32>, tensor<2xi32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}"""
_RAW_DYNAMIC_CONV = """
func.func public @main(%x: tensor<2x6x6x3xf32>, %k: tensor<3x3x3x4xf32>) -> tensor<2x6x6x4xf32> {
  %p = stablehlo.constant dense<[[1, 1], [1, 1]]> : tensor<2x2xi32>
  %y = "stablehlo.dynamic_conv"(%x, %k, %p) {dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, batch_group_count = 1 : i64, window_strides = array<i64: 1, 1>} : (tensor<2x6x6x3xf32>, tensor<3x3x3x4xf32>, tensor<2x2xi32>) -> tensor<2x6x6x4xf32>
  return %y : tensor<2x6x6x4xf32>
}"""
_RAW_TOP_K = """
func.func public @main(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi32>) {
  %v, %i = chlo.top_k(%x, k = 2) : tensor<3x4xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
  return %v, %i : tensor<3x2xf32>, tensor<3x2xi32>
}"""
_RAW_CHOLESKY = """
func.func public @main(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %y = stablehlo.cholesky %a, lower = true : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}"""
_RAW_SHARDING = """
func.func public @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %y = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{replicated}"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}"""


def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


EXAMPLES: tuple[Example, ...] = (
    # ---------------------------------------------------------------- elementwise
    ex("stablehlo.add", ["AddV2"], jnp.add, F, G),
    ex("stablehlo.subtract", ["Sub"], jnp.subtract, F, G),
    ex("stablehlo.multiply", ["Mul"], jnp.multiply, F, G),
    ex("stablehlo.divide", ["RealDiv"], jnp.divide, F, POS),
    ex("stablehlo.remainder", ["TruncateMod"], lax.rem, F, POS),
    ex("stablehlo.maximum", {"AddV2": 1, "Equal": 2, "IsNan": 2, "LogicalAnd": 1, "LogicalOr": 1, "Maximum": 1, "SelectV2": 2}, jnp.maximum, F, G),
    ex("stablehlo.minimum", {"Equal": 2, "IsNan": 2, "LogicalAnd": 1, "LogicalOr": 1, "Minimum": 1, "Neg": 2, "SelectV2": 2, "Sub": 1}, jnp.minimum, F, G),
    ex("stablehlo.power", ["Pow"], jnp.power, POS, G),
    ex("stablehlo.atan2", ["Atan2"], jnp.arctan2, F, G),
    ex("stablehlo.and", ["BitwiseAnd"], jnp.bitwise_and, I, J),
    ex("stablehlo.or", ["LogicalOr"], jnp.logical_or, B, ~B),
    ex("stablehlo.xor", ["BitwiseXor"], jnp.bitwise_xor, I, J),
    ex("stablehlo.not", ["Invert"], jnp.invert, I),
    ex("stablehlo.shift_left", {"Bitcast": 2, "Cast": 2, "GreaterEqual": 2, "LeftShift": 1, "SelectV2": 2}, lax.shift_left, I, J),
    ex("stablehlo.shift_right_logical", {"Bitcast": 5, "Cast": 2, "GreaterEqual": 2, "RightShift": 1, "SelectV2": 2}, lax.shift_right_logical, I, J),
    ex("stablehlo.shift_right_arithmetic", {"Bitcast": 2, "Cast": 2, "Fill": 1, "GreaterEqual": 2, "RightShift": 2, "SelectV2": 2}, lax.shift_right_arithmetic, I, J),
    ex("stablehlo.popcnt", ["PopulationCount", "Cast"], lax.population_count, I),
    ex("stablehlo.count_leading_zeros", {"AddV2": 5, "Bitcast": 3, "Cast": 15, "Equal": 6, "Fill": 11, "LeftShift": 5, "RightShift": 5, "SelectV2": 11}, lax.clz, I),
    ex("stablehlo.negate", ["Neg"], jnp.negative, F),
    ex("stablehlo.abs", ["Abs"], jnp.abs, F),
    ex("stablehlo.sign", ["Abs", "Less", "Mul", "SelectV2", "Sign"], jnp.sign, F),
    ex("stablehlo.exponential", ["Exp"], jnp.exp, F),
    ex("stablehlo.exponential_minus_one", ["Expm1"], jnp.expm1, F),
    ex("stablehlo.log", ["Log"], jnp.log, POS),
    ex("stablehlo.log_plus_one", ["Log1p"], jnp.log1p, POS),
    ex("stablehlo.logistic", ["Sigmoid"], module=_RAW_UNARY.format(op="logistic"),
       args=(F,), reference=lambda x: 1 / (1 + np.exp(-x))),
    ex("stablehlo.sqrt", ["Sqrt"], jnp.sqrt, POS),
    ex("stablehlo.rsqrt", ["Rsqrt"], lax.rsqrt, POS),
    ex("stablehlo.cbrt", {"Abs": 2, "Less": 1, "Mul": 2, "Pow": 1, "SelectV2": 1, "Sign": 1}, jnp.cbrt, F),
    ex("stablehlo.tanh", ["Tanh"], jnp.tanh, F),
    ex("stablehlo.sine", ["Sin"], jnp.sin, F),
    ex("stablehlo.cosine", ["Cos"], jnp.cos, F),
    ex("stablehlo.tan", ["Tan"], jnp.tan, F),
    ex("stablehlo.floor", ["Floor"], jnp.floor, F),
    ex("stablehlo.ceil", ["Ceil"], jnp.ceil, F),
    ex("stablehlo.round_nearest_even", ["Round"], jnp.round, F * 3),
    ex("stablehlo.round_nearest_afz", {"Abs": 1, "AddV2": 1, "Ceil": 1, "Equal": 1, "Floor": 1, "Less": 1, "Round": 1, "SelectV2": 2, "Sign": 1, "Sub": 1},
       lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), F * 3),
    ex("stablehlo.is_finite", ["IsFinite"], jnp.isfinite, F),
    ex("stablehlo.real", ["Real"], jnp.real, C),
    ex("stablehlo.imag", ["Imag"], jnp.imag, C),
    ex("stablehlo.complex", ["Complex"], lax.complex, F, G),
    ex("stablehlo.compare", ["Less"], jnp.less, F, G),
    ex("stablehlo.select", ["SelectV2"], jnp.where, B, F, G),
    ex("stablehlo.clamp", {"Maximum": 1, "Minimum": 1}, lambda x: lax.clamp(np.float32(-0.5), x, np.float32(0.5)), F),
    ex("stablehlo.convert", ["Cast"], lambda x: x.astype(jnp.float16), F),
    ex("stablehlo.bitcast_convert", ["Bitcast"],
       lambda x: lax.bitcast_convert_type(x, jnp.int32), F),
    ex("stablehlo.reduce_precision", {"AddV2": 2, "Bitcast": 2, "BitwiseAnd": 4, "BitwiseOr": 1, "Greater": 1, "IsNan": 1, "LessEqual": 1, "RightShift": 1, "SelectV2": 3}, lambda x: lax.reduce_precision(x, 5, 10), F),
    ex("stablehlo.composite", {"Abs": 1, "AddV2": 3, "Exp": 2, "Expm1": 1, "Less": 1, "Mul": 1, "RealDiv": 1, "SelectV2": 1, "Sub": 2}, jnp.sinh, F),
    # ---------------------------------------------------------------- shapes
    ex("stablehlo.constant", [], lambda: jnp.array([[1.5, -2.0], [0.0, 3.0]])),
    ex("stablehlo.iota", [], lambda: lax.iota(jnp.int32, 5)),
    ex("stablehlo.dynamic_iota", ["AddV2", "Cast", "Range", "Reshape", "Shape", "StridedSlice"], lambda x: x + jnp.arange(x.shape[0])[:, None], F,
       poly=("b, 4",)),
    ex("stablehlo.broadcast_in_dim", ["BroadcastTo", "Reshape"],
       lambda x: jnp.broadcast_to(x[:, None, :], (3, 2, 4)), F),
    ex("stablehlo.dynamic_broadcast_in_dim", ["AddV2"], lambda x: x + F[0], F,
       poly=("b, 4",)),
    ex("stablehlo.reshape", ["Reshape"], lambda x: x.reshape(4, 3), F),
    ex("stablehlo.dynamic_reshape", ["Reshape"], lambda x: x.reshape(-1), F, poly=("b, 4",)),
    ex("stablehlo.transpose", ["Transpose"], jnp.transpose, F),
    ex("stablehlo.slice", ["StridedSlice"], lambda x: x[1:, ::2], F),
    ex("stablehlo.real_dynamic_slice", ["StridedSlice"], module=_RAW_REAL_DYNAMIC_SLICE, args=(F,),
       reference=lambda x: x[1:3, 0:4:2]),
    ex("stablehlo.concatenate", ["ConcatV2"], lambda x, y: jnp.concatenate([x, y], 1), F, G),
    ex("stablehlo.reverse", ["ReverseV2"], lambda x: x[::-1], F),
    ex("stablehlo.get_dimension_size", ["Cast", "Mul", "Shape", "StridedSlice"], lambda x: x * x.shape[0], F, poly=("b, 4",)),
    ex("stablehlo.pad", ["PadV2"], lambda x: jnp.pad(x, ((1, 2), (0, 1))), F),
    ex("stablehlo.dynamic_pad", {"AddV2": 4, "ConcatV2": 6, "ExpandDims": 2, "Fill": 3, "Maximum": 10, "Mul": 4, "Neg": 4, "Pack": 15, "PadV2": 1, "Reshape": 2, "StridedSlice": 9, "Sub": 4, "Transpose": 2, "Unpack": 3}, module=_RAW_DYNAMIC_PAD, args=(F,),
       reference=lambda x: np.asarray(lax.pad(x, np.float32(0.5), ((1, 0, 0), (0, 2, 1))))),
    ex("stablehlo.optimization_barrier", [], lax.optimization_barrier, F),
    # ---------------------------------------------------------------- indexing
    ex("stablehlo.gather", ["GatherV2"], lambda x: x[jnp.array([2, 0])], F),
    ex("stablehlo.dynamic_gather", {"Cast": 3, "GatherV2": 1, "Maximum": 1, "Minimum": 1, "Pack": 1, "Slice": 1, "StridedSlice": 4, "Sub": 1}, module=_RAW_DYNAMIC_GATHER,
       args=(F, np.array([[2], [0]], np.int32)), reference=lambda x, i: x[i[:, 0]]),
    ex("stablehlo.scatter", {"AddV2": 1, "BroadcastTo": 3, "Cast": 3, "ExpandDims": 2, "Fill": 1, "GatherV2": 2, "GreaterEqual": 1, "LessEqual": 1, "LogicalAnd": 2, "Pack": 1, "Range": 1, "Reshape": 6, "StridedSlice": 5, "Sub": 1, "TensorScatterAdd": 1, "Where": 1}, lambda x: x.at[jnp.array([0, 2])].add(1.0), F),
    ex("stablehlo.dynamic_slice", {"AddV2": 1, "Cast": 2, "Less": 1, "Maximum": 2, "Minimum": 2, "Pack": 1, "SelectV2": 1, "Slice": 1, "StridedSlice": 2, "Sub": 2}, lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 4)), F,
       np.int32(1)),
    ex("stablehlo.dynamic_update_slice", {"AddV2": 1, "Cast": 2, "Fill": 1, "Less": 1, "Maximum": 2, "Minimum": 2, "Pack": 2, "Pad": 2, "SelectV2": 2, "StridedSlice": 4, "Sub": 4},
       lambda x, i: lax.dynamic_update_slice(x, G[:2], (i, 0)), F, np.int32(1)),
    # ---------------------------------------------------------------- reductions and windows
    ex("stablehlo.reduce", ["Sum"], lambda x: jnp.sum(x, 1), F),
    ex("stablehlo.reduce_window", {"AddV2": 3, "Equal": 1, "Fill": 1, "SelectV2": 1, "StridedSlice": 5},
       lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID"),
       IMG),
    ex("stablehlo.select_and_scatter", {"AddV2": 4, "Equal": 4, "Fill": 11, "GreaterEqual": 3, "LogicalAnd": 7, "LogicalNot": 6, "LogicalOr": 6, "PadV2": 8, "Reshape": 19, "SelectV2": 14, "Slice": 8, "StridedSlice": 2}, jax.grad(lambda x: _max_pool(x).sum()), IMG),
    # ---------------------------------------------------------------- contractions
    ex("stablehlo.dot_general", ["MatMul"], jnp.matmul, F, G.T),
    ex("stablehlo.dot", ["MatMul"], module=_RAW_DOT, args=(F, G.T[:, :2].copy()),
       reference=lambda a, b: a @ b),
    ex("stablehlo.convolution", ["Conv2D"],
       lambda x: lax.conv_general_dilated(x, KERNEL, (1, 1), "SAME",
                                          dimension_numbers=("NHWC", "HWIO", "NHWC")), IMG),
    ex("stablehlo.dynamic_conv", ["Conv2D", "Unpack"], module=_RAW_DYNAMIC_CONV, args=(IMG, KERNEL),
       reference=lambda x, k: np.asarray(lax.conv_general_dilated(
           x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))), rtol=1e-5,
       atol=1e-5),
    # ---------------------------------------------------------------- sorting
    ex("stablehlo.sort", {"Bitcast": 1, "BitwiseXor": 2, "BroadcastTo": 1, "Equal": 1, "GatherV2": 1, "Less": 1, "NotEqual": 1, "SelectV2": 3, "TopKV2": 1}, lambda x: jnp.sort(x, axis=1), F),
    ex("chlo.top_k", ["Bitcast", "BitwiseXor", "GatherV2", "Less", "SelectV2", "TopKV2"], module=_RAW_TOP_K, args=(F,),
       reference=lambda x: [np.asarray(v) for v in lax.top_k(x, 2)]),
    # ---------------------------------------------------------------- random bits, fft, linalg
    ex("stablehlo.rng_bit_generator", {"AddV2": 24, "Bitcast": 2, "BitwiseAnd": 23, "BitwiseXor": 40, "Cast": 69, "Less": 2, "Mul": 20, "Pack": 2, "Range": 1, "Reshape": 4, "RightShift": 23, "StridedSlice": 4},
       lambda k: lax.rng_bit_generator(k, (3, 4), dtype=jnp.uint32),
       np.array([1, 2, 3, 4], np.uint32)),
    ex("stablehlo.rng", None, module=_RAW_RNG, args=(np.float32(0), np.float32(1))),
    ex("stablehlo.fft", ["FFT"], jnp.fft.fft, C),
    ex("stablehlo.triangular_solve", ["MatrixTriangularSolve"],
       lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
       np.tril(SPD), F.T.copy()),
    ex("stablehlo.cholesky", {"AddV2": 2, "Equal": 1, "ExpandDims": 1, "Fill": 2, "GatherV2": 3, "GreaterEqual": 1, "IsNan": 1, "Less": 1, "LogicalOr": 1, "MatMul": 1, "Range": 1, "RealDiv": 1, "SelectV2": 3, "Sqrt": 1, "Squeeze": 1, "StatelessWhile": 1, "StridedSlice": 5, "Sub": 1}, module=_RAW_CHOLESKY, args=(SPD,),
       reference=lambda a: np.linalg.cholesky(a), rtol=1e-5, atol=1e-5),
    # ---------------------------------------------------------------- control flow and calls
    ex("func.call", ["Tanh"], lambda x: jax.jit(jnp.tanh)(x), F),
    ex("stablehlo.while", {"AddV2": 2, "Less": 1, "Mul": 1, "Reshape": 1, "StatelessWhile": 1}, lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), F),
    ex("stablehlo.case", ["Cos", "Maximum", "Minimum", "Reshape", "Sin", "StatelessCase"], lambda i, x: lax.switch(i, [jnp.sin, jnp.cos], x),
       np.int32(1), F),
    ex("stablehlo.if", ["Neg", "Reshape", "StatelessIf"], module=_RAW_IF, args=(np.bool_(True), F),
       reference=lambda p, x: -x if p else x),
    ex("stablehlo.custom_call", ["Mul"], lambda x: x * 2, F, poly=("b, 4",)),
    # ---------------------------------------------------------------- custom call targets
    ex("custom_call:shape_assertion", ["Mul"], lambda x: x * 2, F, poly=("b, 4",)),
    ex("custom_call:stablehlo.dynamic_reduce_window", {"AddV2": 10, "Cast": 3, "ConcatV2": 1, "Equal": 1, "Fill": 2, "FloorDiv": 2, "FloorMod": 2, "Less": 1, "Maximum": 12, "Mul": 4, "Neg": 4, "Pack": 12, "PadV2": 1, "Prod": 1, "Reshape": 1, "SelectV2": 1, "Shape": 4, "StatelessWhile": 1, "StridedSlice": 9, "Sub": 6, "Unpack": 4}, lambda x: jnp.cumsum(x, axis=0),
       F, poly=("b, 4",)),
    ex("custom_call:Sharding", [], module=_RAW_SHARDING, args=(F,),
       reference=lambda x: x),
    ex("custom_call:Qr", {"Abs": 2, "AddN": 1, "AddV2": 4, "Cast": 1, "ConcatV2": 1, "Equal": 7, "ExpandDims": 1, "Fill": 1, "GatherV2": 2, "Greater": 2, "GreaterEqual": 1, "Less": 3, "MatMul": 1, "Maximum": 1, "Minimum": 1, "Mul": 6, "Neg": 1, "Pack": 1, "Range": 3, "RealDiv": 4, "Reshape": 1, "SelectV2": 13, "Sqrt": 2, "Square": 2, "Squeeze": 1, "StatelessWhile": 1, "StridedSlice": 11, "Sub": 3, "Sum": 1}, lambda a: jnp.linalg.qr(a)[1], F.T.copy(), rtol=1e-5,
       atol=1e-5),
    ex("custom_call:ProductOfElementaryHouseholderReflectors", {"Abs": 3, "AddN": 1, "AddV2": 5, "Cast": 2, "ConcatV2": 3, "Equal": 8, "ExpandDims": 2, "Fill": 3, "GatherV2": 4, "Greater": 3, "GreaterEqual": 2, "Less": 3, "MatMul": 2, "MatrixSetDiagV3": 1, "Maximum": 1, "Minimum": 2, "Mul": 8, "Neg": 1, "Pack": 3, "Range": 4, "RealDiv": 4, "Reshape": 1, "SelectV2": 14, "Sqrt": 2, "Square": 2, "Squeeze": 2, "StatelessWhile": 2, "StridedSlice": 18, "Sub": 6, "Sum": 1},
       lambda a: jnp.abs(jnp.linalg.qr(a)[0]), F.T.copy(), rtol=1e-5, atol=1e-5),
    # jaxlib's LAPACK calls, kept by a CPU export for TF's kernels (lapack_kernels.py)
    *[ex(f"custom_call:lapack_{t}potrf_ffi", _LAPACK_OPS[f"lapack_{t}potrf_ffi"],
         jnp.linalg.cholesky, _lapack_spd(t),
         rtol=1e-4, atol=1e-4, lapack=True) for t in "sdcz"],
    *[ex(f"custom_call:lapack_{t}trsm_ffi", _LAPACK_OPS[f"lapack_{t}trsm_ffi"],
         lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
         _lapack_spd(t), _lapack_array(t, (4, 2)), rtol=1e-4, atol=1e-4, lapack=True)
      for t in "sdcz"],
    *[ex(f"custom_call:lapack_{t}{'heevd' if t in 'cz' else 'syevd'}_ffi",
         _LAPACK_OPS[f"lapack_{t}{'heevd' if t in 'cz' else 'syevd'}_ffi"],
         lambda a: jnp.linalg.eigvalsh(a), _lapack_spd(t), rtol=1e-4, atol=1e-4, lapack=True)
      for t in "sdcz"],
    *[ex(f"custom_call:lapack_{t}gesdd_ffi", _LAPACK_OPS[f"lapack_{t}gesdd_ffi"],
         lambda a: jnp.linalg.svd(a, compute_uv=False), _lapack_array(t, (4, 3)),
         rtol=1e-4, atol=1e-4, lapack=True) for t in "sdcz"],
    # ---------------------------------------------------------------- raised forms
    ex("raised.unary", ["Erf"], lax.erf, F),
    ex("raised.gelu", ["AddV2", "Erf", "Mul", "Mul", "Mul"],
       lambda x: jax.nn.gelu(x, approximate=False), F),
    ex("raised.relu", ["Maximum"], jax.nn.relu, F),
    ex("raised.relu6", ["Maximum", "Minimum"], jax.nn.relu6, F * 8),
    ex("raised.sigmoid", ["Sigmoid"], jax.nn.sigmoid, F),
    ex("raised.softmax", ["Minimum", "Softmax", "Sum"], jax.nn.softmax, F),
    ex("raised.log_softmax", ["LogSoftmax"], jax.nn.log_softmax, F),
    ex("raised.mean", ["Mean"], lambda x: jnp.mean(x, -1), F),
    ex("raised.avg_pool", ["AvgPool"],
       lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0,
       IMG, poly=("b, 6, 6, 3",)),
)
