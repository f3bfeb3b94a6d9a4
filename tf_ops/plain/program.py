"""A StableHLO module read into Python records, ready to be lowered to TF ops.

`read_program(module_text)` parses the module once with JAX's MLIR bindings and copies what the
lowering needs into frozen records (`Program`, `Function`, `Region`, `Op`, `TensorType`):
operand and result value ids, element types and static shapes (None where symbolic), decoded
attributes (ints, lists, numpy constants, dimension-number dicts) and the user's source line.
The lowering then runs without an MLIR context and can be kept per conversion (the records do
not hold MLIR objects).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

import ml_dtypes
import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import mlir as jax_mlir

from tf_ops import source_lines
from tf_ops.plain.errors import PlainLoweringError

# MLIR element type names -> numpy dtypes (ml_dtypes for the narrow floats).
_ELEMENT_TYPES = {
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "ui8": np.dtype(np.uint8), "ui16": np.dtype(np.uint16), "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "complex<f32>": np.dtype(np.complex64), "complex<f64>": np.dtype(np.complex128),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn), "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8E4M3B11FNUZ": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "i4": np.dtype(ml_dtypes.int4), "ui4": np.dtype(ml_dtypes.uint4),
}

@dataclasses.dataclass(frozen=True)
class TensorType:
    """A ranked tensor type: `shape` has None for a symbolic (dynamic) dimension.

    `element` is the MLIR element type name ("f32", "ui8", "!stablehlo.token", ...) and `dtype`
    its numpy dtype, None for types without one (tokens).
    """
    shape: tuple[int | None, ...]
    element: str
    dtype: np.dtype | None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    def __str__(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"tensor<{dims + 'x' if dims else ''}{self.element}>"


@dataclasses.dataclass(frozen=True)
class Region:
    """A block: its arguments (value ids and types), its ops, and the ids its terminator returns."""
    args: tuple[int, ...]
    arg_types: tuple[TensorType, ...]
    ops: tuple["Op", ...]
    returns: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Op:
    """One StableHLO (or chlo, func) operation.

    Attributes:
      name: e.g. "stablehlo.add".
      operands, results: value ids.
      operand_types, result_types: their types.
      attrs: the op's attributes decoded to Python values (see `_decode_attribute`).
      regions: nested blocks (reduce bodies, while cond/body, case branches, sort comparators).
      source: the user's "file.py:line" (or JAX's op path) for messages; "" if unknown.
      location: the op's whole MLIR location: the ops one JAX primitive was lowered to share
        it (its name ends with the primitive's, "jit(f)/erfc"), which `rewrite` reads.
    """
    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    operand_types: tuple[TensorType, ...]
    result_types: tuple[TensorType, ...]
    attrs: dict
    regions: tuple[Region, ...]
    source: str
    location: str = ""

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    @property
    def dtype_text(self) -> str:
        """The element types of the op's operands and results, for messages."""
        elements = dict.fromkeys(t.element for t in self.operand_types + self.result_types)
        return ", ".join(elements) or "no tensors"


@dataclasses.dataclass(frozen=True)
class Function:
    name: str
    body: Region
    result_types: tuple[TensorType, ...]


@dataclasses.dataclass(frozen=True)
class Program:
    """The functions of a module by name; `main` is the public entry point."""
    functions: dict[str, Function]
    main: str = "main"

    def ops(self):
        """Every op of every function, nested regions included (pre-order)."""
        def walk(region):
            for op in region.ops:
                yield op
                for nested in op.regions:
                    yield from walk(nested)
        for function in self.functions.values():
            yield from walk(function.body)


def read_program(module_text: str) -> Program:
    """Parses StableHLO text (e.g. `Exported.mlir_module()`) into a `Program`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), "float32"))
        >>> program = read_program(exp.mlir_module())
        >>> [op.name for op in program.functions["main"].body.ops]
        ['stablehlo.sine']
    """
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(module_text)
        reader = _Reader()
        functions = {}
        for operation in module.body.operations:
            op = operation.operation
            if op.name != "func.func":
                continue
            name = op.attributes["sym_name"].value
            function_type = op.attributes["function_type"].value
            result_types = tuple(_tensor_type(t) for t in function_type.results)
            functions[name] = Function(name, reader.region(op.regions[0].blocks[0]), result_types)
    return Program({name: dataclasses.replace(f, body=_with_called(f.body, functions))
                    for name, f in functions.items()})


def _with_called(region: Region, functions: dict) -> Region:
    """`region` with each custom call's called functions attached as its regions (e.g. the
    body of `stablehlo.dynamic_reduce_window`), so that a check reads them from the op."""
    ops = []
    for op in region.ops:
        regions = tuple(_with_called(r, functions) for r in op.regions)
        called = op.attr("called_computations") if op.name == "stablehlo.custom_call" else None
        if called and not regions:
            regions = tuple(functions[name].body for name in called if name in functions)
        ops.append(dataclasses.replace(op, regions=regions) if regions != op.regions else op)
    return dataclasses.replace(region, ops=tuple(ops))


class _Reader:
    """Numbers MLIR values as they are defined and copies ops into records."""

    def __init__(self):
        self.ids: dict = {}

    def _define(self, value) -> int:
        self.ids[value] = len(self.ids)
        return self.ids[value]

    def region(self, block) -> Region:
        args = tuple(self._define(a) for a in block.arguments)
        arg_types = tuple(_tensor_type(a.type) for a in block.arguments)
        ops, returns = [], ()
        for operation in block.operations:
            op = operation.operation
            if op.name in ("func.return", "stablehlo.return"):
                returns = tuple(self.ids[v] for v in op.operands)
                continue
            ops.append(self.op(op))
        return Region(args, arg_types, tuple(ops), returns)

    def op(self, op) -> Op:
        operands = tuple(self.ids[v] for v in op.operands)
        regions = tuple(self.region(r.blocks[0]) for r in op.regions if len(r.blocks))
        results = tuple(self._define(r) for r in op.results)
        attrs = {}
        for name in (op.attributes[i].name for i in range(len(op.attributes))):
            try:
                attrs[name] = _decode_attribute(op.attributes[name], op)
            except TypeError:
                # The bindings cannot downcast complex dense constants: read the op's text.
                result = _tensor_type(op.results[0].type)
                text = str(op)
                attrs[name] = _dense_from_text(text[text.index("dense<"):], result.shape,
                                               result.dtype)
        location = str(op.location)
        return Op(name=op.name, operands=operands, results=results,
                  operand_types=tuple(_tensor_type(v.type) for v in op.operands),
                  result_types=tuple(_tensor_type(r.type) for r in op.results),
                  attrs=attrs, regions=regions, source=source_lines.source(location),
                  location=location)


def _tensor_type(t) -> TensorType:
    if isinstance(t, ir.RankedTensorType):  # the bindings downcast types and attributes
        ranked = t
        shape = tuple(None if ranked.is_dynamic_dim(i) else ranked.get_dim_size(i)
                      for i in range(ranked.rank))
        element = str(ranked.element_type)
        return TensorType(shape, element, _ELEMENT_TYPES.get(element))
    return TensorType((), str(t), None)  # !stablehlo.token and other non-tensor types


def _decode_attribute(attribute, op) -> Any:
    """An MLIR attribute as a Python value: ints, floats, bools, strings, lists, numpy arrays
    (dense elements, shaped as their type), dicts for StableHLO's dimension-number attributes,
    strings for enums ("LT", "FLOAT", ...). Anything else stays as its text."""
    if isinstance(attribute, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr,
                              ir.DenseBoolArrayAttr)):
        return [x for x in attribute]
    if isinstance(attribute, ir.DenseElementsAttr):
        return dense_to_numpy(attribute)
    if isinstance(attribute, ir.BoolAttr):
        return attribute.value
    if isinstance(attribute, ir.IntegerAttr):
        return attribute.value
    if isinstance(attribute, ir.FloatAttr):
        return attribute.value
    if isinstance(attribute, ir.StringAttr):
        return attribute.value
    if isinstance(attribute, ir.FlatSymbolRefAttr):
        return attribute.value
    if isinstance(attribute, ir.ArrayAttr):
        return [_decode_attribute(a, op) for a in attribute]
    if isinstance(attribute, ir.DictAttr):
        return {attribute[i].name: _decode_attribute(attribute[i].attr, op)
                for i in range(len(attribute))}
    if isinstance(attribute, ir.TypeAttr):
        return str(attribute.value)
    for kind, fields in _DIMENSION_NUMBERS:
        if kind.isinstance(attribute):
            typed = kind(attribute)
            return {field: _plain(getattr(typed, field)) for field in fields}
    for kind in (stablehlo.ComparisonDirectionAttr, stablehlo.ComparisonTypeAttr,
                 stablehlo.FftTypeAttr, stablehlo.RngAlgorithmAttr, stablehlo.PrecisionAttr,
                 stablehlo.TransposeAttr):
        if kind.isinstance(attribute):
            return kind(attribute).value
    return str(attribute)


def _plain(value):
    return [x for x in value] if not isinstance(value, int) else value


_DIMENSION_NUMBERS = (
    (stablehlo.GatherDimensionNumbers,
     ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
      "start_indices_batching_dims", "start_index_map", "index_vector_dim")),
    (stablehlo.ScatterDimensionNumbers,
     ("update_window_dims", "inserted_window_dims", "input_batching_dims",
      "scatter_indices_batching_dims", "scattered_dims_to_operand_dims", "index_vector_dim")),
    (stablehlo.DotDimensionNumbers,
     ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
      "rhs_contracting_dimensions")),
    (stablehlo.ConvDimensionNumbers,
     ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
      "kernel_input_feature_dimension", "kernel_output_feature_dimension",
      "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
      "output_spatial_dimensions")),
)


def dense_to_numpy(attribute) -> np.ndarray:
    """A dense elements attribute as a numpy array of its type's shape and dtype.

    The bindings' buffer protocol covers ints, bools, f32/f64 and f16; bfloat16, complex and
    float8 constants are read from the attribute's text (decimal, per-element hex bit
    patterns, or one hex blob of raw little-endian bytes).
    """
    shaped = attribute.type
    shape = tuple(shaped.shape)
    element = str(shaped.element_type)
    # `index` arrays are attributes only (custom calls' operand/result layouts), never values.
    dtype = _ELEMENT_TYPES.get(element) or (np.dtype(np.int64) if element == "index" else None)
    if dtype is None:
        raise PlainLoweringError(f"a constant of element type {element} has no numpy type")
    try:
        value = np.array(attribute)
        if value.dtype == dtype or (value.dtype.kind == dtype.kind
                                    and value.dtype.itemsize == dtype.itemsize):
            return np.broadcast_to(value.astype(dtype), shape).copy()
    except (TypeError, ValueError):
        pass
    return _dense_from_text(str(attribute), shape, dtype)


_HEX_BLOB = re.compile(r'dense<"0x([0-9A-Fa-f]*)">')
_TOKEN = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|true|false")


def _dense_from_text(text: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    blob = _HEX_BLOB.match(text)
    if blob:
        raw = np.frombuffer(bytes.fromhex(blob.group(1)), dtype=dtype)
        return np.broadcast_to(raw, shape).copy() if raw.size == 1 else raw.reshape(shape).copy()
    body = text[text.index("<") + 1:text.rindex(">", 0, text.index(" : ") if " : " in text
                                                 else len(text))]
    is_complex = dtype.kind == "c"
    part_dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64) \
        if is_complex else dtype
    bits_dtype = np.dtype(f"uint{part_dtype.itemsize * 8}")
    values = []
    for token in _TOKEN.findall(body):
        if token.startswith("0x"):
            values.append(np.array(int(token, 16), bits_dtype).view(part_dtype))
        elif token in ("true", "false"):
            values.append(np.array(token == "true", part_dtype))
        else:
            values.append(np.array(float(token)).astype(part_dtype))
    flat = np.array(values, dtype=part_dtype)
    if is_complex:
        flat = flat[0::2].astype(dtype) + 1j * flat[1::2].astype(dtype)
    if flat.size == 1:
        return np.broadcast_to(flat.reshape(()), shape).astype(dtype)
    return flat.reshape(shape).astype(dtype)
