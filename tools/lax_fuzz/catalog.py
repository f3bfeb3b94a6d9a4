"""What the op generators share: the values a program has so far (`Val`), what one generator
proposes (`Candidate`), the generation context (`Ctx`) and the registry of generators.

Every value has a state that keeps the comparison sound (docs/exactness.md):
- "exact": bit-exact on every path given bit-exact inputs (integer and bit ops, IEEE
  correctly rounded float arithmetic, comparisons, data movement, ...);
- "unrounded": a float16/bfloat16 result of arithmetic, which XLA may keep in float32 for
  the next op (excess precision) where TF rounds it: only ops that commute with rounding
  (data movement, max, neg, ...) take it as is; arithmetic on it is the tolerated
  "excess_precision" family. Also a float32/64 product, which XLA may fuse with a following
  add or subtract into one fused multiply-add (one rounding) where TF rounds the product:
  an add on it is the tolerated "fma_contraction" family, any other op takes it as exact;
- "approx": within a tolerated family's bound (a transcendental function, a sum of many
  terms); only "transparent" ops (which move, select or negate elements without rounding)
  may follow, so the bound still holds for the program's output. An op that rounds,
  compares or discretizes an approximate value would turn a tolerated ulp into an unbounded
  difference; the generator never writes one.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from tools.lax_fuzz import values as values_lib

KINDS = ("exact", "arith", "approx", "transparent")


@dataclasses.dataclass(frozen=True)
class Val:
    """A value of the program being generated."""
    name: str
    shape: tuple
    dtype: str
    state: str = "exact"
    families: frozenset = frozenset()
    mag: str | None = None  # the step whose companion m_<mag> is this value's magnitude
    derived: bool = False   # made by an op (an input is not)

    @property
    def is_float(self) -> bool:
        return values_lib.is_float(self.dtype)

    @property
    def is_inexact(self) -> bool:
        return values_lib.is_float(self.dtype) or values_lib.is_complex(self.dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass
class Candidate:
    """One op a generator proposes: `template.format(*names of operands)`.

    kind: "exact" (takes exact values only), "arith" (IEEE-rounded arithmetic: exact, but a
      float16/bfloat16 result is "unrounded"), "approx" (a tolerated `family`, `mag` its
      companion template, over the operands, when the bound is scaled) or "transparent".
    arith_mag: for "arith", the companion of one op on unrounded 16-bit values (None: not
      allowed on them), over the operands' `wide()` magnitudes.
    mag_rule: for "transparent" with an approximate operand: "same" (the op applied to the
      companions), "identity" (the first companion), "max" (their maximum), "norm" (their
      largest element, broadcast).
    """
    op: str
    template: str
    operands: tuple
    kind: str
    family: str | None = None
    mag: str | None = None
    arith_mag: str | None = None
    mag_rule: str = "same"
    differentiable: bool = True
    product: bool = False  # a float multiply, which XLA may fuse into a following add
    adds: bool = False     # an add or subtract, into which XLA may fuse a product (FMA)


PRODUCTS = frozenset({"mul", "square", "integer_pow3", "mul_const"})
ADDS = frozenset({"add", "sub", "add_const", "sub_const", "iota_add"})


Generator = Callable[["Ctx"], "Candidate | None"]
REGISTRY: list[tuple[float, str, Generator]] = []


def register(weight: float, group: str):
    """Adds a generator to the registry with its drawing weight and op group."""
    def add(fn: Generator) -> Generator:
        REGISTRY.append((weight, group, fn))
        return fn
    return add


class Ctx:
    """The program being generated: its values, new inputs, the random stream, x64."""

    def __init__(self, rng: np.random.Generator, x64: bool, dtypes: tuple[str, ...]):
        self.rng = rng
        self.x64 = x64
        self.dtypes = dtypes
        self.pool: list[Val] = []
        self.inputs: dict[str, np.ndarray] = {}
        self.parameters: set[str] = set()  # a layer's weights (Program.parameters)

    # -- values
    def new_input(self, shape, dtype: str, style: str | None = None, values=None,
                  parameter: bool = False) -> Val:
        name = f"x{len(self.inputs)}"
        if parameter:
            self.parameters.add(name)
        self.inputs[name] = (values_lib.draw(self.rng, tuple(shape), dtype, style)
                             if values is None else np.asarray(values,
                                                               values_lib.np_dtype(dtype)))
        val = Val(name, tuple(shape), dtype)
        self.pool.append(val)
        return val

    def pick(self, test: Callable[[Val], bool] = lambda v: True) -> Val | None:
        """A random value of the pool passing `test`, the newest ones more likely."""
        fits = [v for v in self.pool if test(v)]
        if not fits:
            return None
        weights = np.arange(1, len(fits) + 1, dtype=np.float64) ** 1.5
        return fits[int(self.rng.choice(len(fits), p=weights / weights.sum()))]

    def partner(self, val: Val, dtype: str | None = None, shape=None) -> Val:
        """A second operand for a binary op: a pool value of the same shape and dtype, or a
        new input."""
        dtype = dtype or val.dtype
        shape = val.shape if shape is None else tuple(shape)
        found = self.pick(lambda v: v.shape == shape and v.dtype == dtype and v is not val)
        if found is not None and self.rng.random() < 0.6:
            return found
        return self.new_input(shape, dtype)

    # -- random choices
    def choice(self, options):
        options = list(options)
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def axes(self, rank: int, allow_empty: bool = True) -> tuple[int, ...]:
        if rank == 0:
            return ()
        chosen = tuple(int(a) for a in np.flatnonzero(self.rng.random(rank) < 0.5))
        if not chosen and not allow_empty:
            chosen = (int(self.rng.integers(rank)),)
        return chosen

    def shape(self, rank: int | None = None, max_size: int = 48) -> tuple[int, ...]:
        rank = int(self.rng.choice([0, 1, 2, 3, 4], p=[0.08, 0.3, 0.34, 0.2, 0.08])
                   ) if rank is None else rank
        while True:
            dims = tuple(int(d) for d in self.rng.choice([0, 1, 1, 2, 3, 4, 5, 7, 8], rank))
            if 0 in dims and not self.chance(0.3):
                continue
            if int(np.prod(dims, dtype=np.int64)) <= max_size:
                return dims

    def dtype(self, test: Callable[[str], bool] = lambda d: True) -> str | None:
        fits = [d for d in self.dtypes if test(d)]
        return self.choice(fits) if fits else None


def exact_operand(v: Val) -> bool:
    return v.state == "exact"


def literal(dtype: str, value) -> str:
    """Source text of a scalar constant of `dtype`."""
    return f"np.array({value!r}, {_np_name(dtype)})" if dtype != "bfloat16" \
        else f"jnp.bfloat16({value!r})"


def _np_name(dtype: str) -> str:
    return f"np.{dtype}" if dtype != "bool" else "np.bool_"


def dtype_source(dtype: str) -> str:
    return "jnp.bfloat16" if dtype == "bfloat16" else f"jnp.{dtype}"
