"""Input values drawn towards the edges: ±0, subnormals, ±inf, NaN, the largest and smallest
values of each type, integer extremes, rounding ties, and arrays with repeated values (ties
for sort, argmax and max-pooling), mixed with ordinary random values."""
from __future__ import annotations

import ml_dtypes
import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
WIDE = frozenset({"float64", "complex128", "int64", "uint64"})  # need x64
ALL = FLOATS + COMPLEX + SIGNED + UNSIGNED + ("bool",)

STYLES = ("normal", "edge", "ties", "special", "small")


def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def is_float(name: str) -> bool:
    return name in FLOATS


def is_complex(name: str) -> bool:
    return name in COMPLEX


def is_int(name: str) -> bool:
    return name in SIGNED or name in UNSIGNED


def bits(name: str) -> int:
    return 1 if name == "bool" else np_dtype(name).itemsize * 8


def component(name: str) -> str:
    return {"complex64": "float32", "complex128": "float64"}.get(name, name)


def _float_edges(name: str) -> np.ndarray:
    info = ml_dtypes.finfo(np_dtype(name))
    tiny, smallest = float(info.smallest_normal), float(info.smallest_subnormal)
    big = float(info.max)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -7.0, 2.0,
              smallest, -smallest, smallest * 3, tiny, -tiny, tiny * 0.5, big, -big, big * 0.5,
              np.inf, -np.inf, np.nan, -np.nan, 88.75, -103.5, 709.8, 1e4, -65504.0, 1e30,
              3.14159265, 1.5707963, 16777217.0, 2147483648.0, -9.3e18, 0.999, 1.0001]
    with np.errstate(over="ignore"):
        return np.array(values, np.float64).astype(np_dtype(name))


def _int_edges(name: str) -> np.ndarray:
    info = np.iinfo(np.dtype(name))
    n = bits(name)
    values = {0, 1, 2, 3, 7, n - 1, n, n + 1, info.max, info.max - 1, info.min, info.min + 1,
              info.max // 2, 255, 256}
    if info.min < 0:
        values |= {-1, -2, -n, info.min // 2}
    return np.array(sorted(v for v in values if info.min <= v <= info.max), np.dtype(name))


def edges(name: str) -> np.ndarray:
    """The special values of a (real or integer) dtype."""
    if name == "bool":
        return np.array([False, True])
    if is_int(name):
        return _int_edges(name)
    return _float_edges(component(name))


def _ordinary(rng, name: str, size: int, style: str) -> np.ndarray:
    if name == "bool":
        return rng.random(size) < 0.5
    if is_int(name):
        info = np.iinfo(np.dtype(name))
        if style == "small":
            low, high = max(info.min, -4), min(info.max, 5)
        else:
            low, high = max(info.min, -100), min(info.max, 101)
        return rng.integers(low, high, size, dtype=np.int64).astype(name)
    scale = {"small": 1.0}.get(style, float(rng.choice([1.0, 1.0, 3.0, 1e-2, 1e2])))
    values = rng.standard_normal(size) * scale
    if style == "small":
        values = np.round(values * 4) / 4  # few bits: exact sums, ties
    return values.astype(np_dtype(component(name)))


def _real(rng, name: str, size: int, style: str) -> np.ndarray:
    special = edges(name)
    if style == "special":
        return rng.choice(special, size)
    plain = _ordinary(rng, name, size, style)
    if style == "ties":
        pool = np.concatenate([rng.choice(special, 2), plain[:2]]) if size else plain
        return rng.choice(pool, size).astype(plain.dtype) if size else plain
    if style == "edge":
        mask = rng.random(size) < 0.4
        return np.where(mask, rng.choice(special, size), plain).astype(plain.dtype)
    return plain


def draw(rng: np.random.Generator, shape: tuple, name: str, style: str | None = None,
         ) -> np.ndarray:
    """An array of `shape` and dtype `name` in one of `STYLES` (random when None)."""
    style = style or str(rng.choice(STYLES, p=[0.3, 0.3, 0.15, 0.1, 0.15]))
    size = int(np.prod(shape, dtype=np.int64))
    if is_complex(name):
        real = _real(rng, name, size, style)
        imag = _real(rng, name, size, style)
        flat = np.empty(size, name)
        flat.real, flat.imag = real, imag  # part by part: keeps -0.0, inf and NaN parts
    else:
        flat = _real(rng, name, size, style)
    return np.asarray(flat, np_dtype(name)).reshape(shape)


def tangent(rng: np.random.Generator, shape: tuple, name: str) -> np.ndarray:
    """An ordinary tangent or cotangent: small multiples of 1/4, some exact zeros."""
    values = np.round(rng.standard_normal(shape) * 4) / 4 + 0.0  # + 0.0: no -0.0
    return values.astype(np_dtype(name))
