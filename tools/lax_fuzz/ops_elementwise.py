"""Elementwise generators: float, complex, integer and bit ops, comparisons, selections,
conversions and bitcasts, each with its contract kind (see `catalog`)."""
from __future__ import annotations

import numpy as np

from tools.lax_fuzz import values as V
from tools.lax_fuzz.catalog import Candidate, Ctx, dtype_source, literal, register

REAL = V.is_float
CPLX = V.is_complex
INT = V.is_int
SIGNED = V.SIGNED.__contains__
INEXACT = lambda d: V.is_float(d) or V.is_complex(d)
NUMERIC = lambda d: d != "bool"
ANY = lambda d: True


def accepts(kind: str, arith_mag: str | None = None):
    """Which operand states an op of `kind` takes (see `catalog`)."""
    if kind == "transparent":
        return lambda v: True
    if kind == "arith" and arith_mag:
        return lambda v: v.state in ("exact", "unrounded")
    return lambda v: v.state == "exact"


# name, template, dtypes, kind, family, companion (approx) / arith companion, differentiable
UNARY = [
    ("neg", "lax.neg({0})", NUMERIC, "transparent", None, None, True),
    ("abs", "lax.abs({0})", lambda d: REAL(d) or INT(d), "transparent", None, None, True),
    ("sign", "lax.sign({0})", lambda d: REAL(d) or INT(d), "exact", None, None, True),
    ("floor", "lax.floor({0})", REAL, "exact", None, None, True),
    ("ceil", "lax.ceil({0})", REAL, "exact", None, None, True),
    ("round_afz", "lax.round({0}, lax.RoundingMethod.AWAY_FROM_ZERO)", REAL, "exact", None,
     None, True),
    ("round_even", "lax.round({0}, lax.RoundingMethod.TO_NEAREST_EVEN)", REAL, "exact", None,
     None, True),
    ("is_finite", "lax.is_finite({0})", REAL, "exact", None, None, True),
    ("sqrt", "lax.sqrt({0})", REAL, "arith", None, None, True),
    ("square", "lax.square({0})", lambda d: REAL(d) or INT(d), "arith", None,
     "wide({0}) * wide({0})", True),
    ("integer_pow3", "lax.integer_pow({0}, 3)", lambda d: REAL(d) or INT(d), "arith", None,
     None, True),
    ("integer_pow_neg2", "lax.integer_pow({0}, -2)", REAL, "arith", None, None, True),
    ("reciprocal", "lax.div(jnp.ones_like({0}), {0})", REAL, "arith", None, None, True),
    ("exp", "lax.exp({0})", REAL, "approx", "libm", None, True),
    ("exp2", "lax.exp2({0})", REAL, "approx", "libm", None, True),
    ("log", "lax.log({0})", REAL, "approx", "libm", None, True),
    ("log1p", "lax.log1p({0})", REAL, "approx", "libm", None, True),
    ("expm1", "lax.expm1({0})", REAL, "approx", "libm", None, True),
    ("tanh", "lax.tanh({0})", REAL, "approx", "libm", None, True),
    ("logistic", "lax.logistic({0})", REAL, "approx", "libm", None, True),
    ("sinh", "lax.sinh({0})", REAL, "approx", "libm", None, True),
    ("cosh", "lax.cosh({0})", REAL, "approx", "libm", None, True),
    ("asinh", "lax.asinh({0})", REAL, "approx", "libm", None, True),
    ("acosh", "lax.acosh({0})", REAL, "approx", "libm", None, True),
    ("atanh", "lax.atanh({0})", REAL, "approx", "libm", None, True),
    ("asin", "lax.asin({0})", REAL, "approx", "libm", None, True),
    ("acos", "lax.acos({0})", REAL, "approx", "libm", None, True),
    ("atan", "lax.atan({0})", REAL, "approx", "libm", None, True),
    ("cbrt", "lax.cbrt({0})", REAL, "approx", "libm", None, True),
    ("rsqrt", "lax.rsqrt({0})", REAL, "approx", "libm", None, True),
    ("erf", "lax.erf({0})", REAL, "approx", "libm", None, True),
    ("erfc", "lax.erfc({0})", REAL, "approx", "erfc_tail", None, True),
    ("sin", "lax.sin({0})", REAL, "approx", "libm_periodic", "jnp.ones_like(wide({0}))", True),
    ("cos", "lax.cos({0})", REAL, "approx", "libm_periodic", "jnp.ones_like(wide({0}))", True),
    ("tan", "lax.tan({0})", REAL, "approx", "libm_periodic", "1 + wide(lax.tan({0})) ** 2",
     True),
    ("lgamma", "lax.lgamma({0})", REAL, "approx", "special", "1 + wide(lax.lgamma({0}))", True),
    ("digamma", "lax.digamma({0})", REAL, "approx", "special", "1 + wide(lax.digamma({0}))",
     True),
    ("erf_inv", "lax.erf_inv({0})", REAL, "approx", "special", "1 + wide(lax.erf_inv({0}))",
     True),
    ("reduce_precision_bf16", "lax.reduce_precision({0}, 8, 7)", REAL, "exact", None, None,
     True),
    ("reduce_precision_e5m2", "lax.reduce_precision({0}, 5, 2)", REAL, "exact", None, None,
     True),
    ("reduce_precision_e4m3", "lax.reduce_precision({0}, 4, 3)", REAL, "exact", None, None,
     True),
    # complex
    ("real", "lax.real({0})", CPLX, "transparent", None, None, True),
    ("imag", "lax.imag({0})", CPLX, "transparent", None, None, True),
    ("conj", "lax.conj({0})", CPLX, "transparent", None, None, True),
    ("abs_complex", "lax.abs({0})", CPLX, "approx", "complex_arith", "wide({0})", True),
    ("sign_complex", "lax.sign({0})", CPLX, "approx", "complex_arith",
     "jnp.ones_like(wide({0}))", True),
    ("exp_complex", "lax.exp({0})", CPLX, "approx", "complex_arith",
     "wide(lax.exp({0})) * (1 + wide(lax.imag({0})))", True),
    ("log_complex", "lax.log({0})", CPLX, "approx", "complex_arith",
     "1 + wide(lax.log({0}))", True),
    ("sqrt_complex", "lax.sqrt({0})", CPLX, "approx", "complex_arith",
     "wide(lax.sqrt({0}))", True),
    # integers and bits
    ("not", "lax.bitwise_not({0})", lambda d: INT(d) or d == "bool", "exact", None, None, True),
    ("popcount", "lax.population_count({0})", INT, "exact", None, None, True),
    ("clz", "lax.clz({0})", INT, "exact", None, None, True),
]

# name, template, dtypes, kind, family, companion / arith companion
BINARY = [
    ("add", "lax.add({0}, {1})", NUMERIC, "arith", None, "wide({0}) + wide({1})"),
    ("sub", "lax.sub({0}, {1})", NUMERIC, "arith", None, "wide({0}) + wide({1})"),
    ("mul", "lax.mul({0}, {1})", lambda d: REAL(d) or INT(d), "arith", None,
     "wide({0}) * wide({1})"),
    ("div", "lax.div({0}, {1})", lambda d: REAL(d) or INT(d), "arith", None,
     "wide({0}) / wide({1})"),
    ("rem", "lax.rem({0}, {1})", lambda d: REAL(d) or INT(d), "exact", None, None),
    ("max", "lax.max({0}, {1})", lambda d: REAL(d) or INT(d) or d == "bool", "transparent",
     None, None),
    ("min", "lax.min({0}, {1})", lambda d: REAL(d) or INT(d) or d == "bool", "transparent",
     None, None),
    ("pow", "lax.pow({0}, {1})", REAL, "approx", "libm", None),
    ("atan2", "lax.atan2({0}, {1})", REAL, "approx", "libm", None),
    ("nextafter", "lax.nextafter({0}, {1})", lambda d: d in ("float32", "float64"), "exact",
     None, None),
    ("copysign", "jnp.copysign({0}, {1})", REAL, "exact", None, None),
    ("mul_complex", "lax.mul({0}, {1})", CPLX, "approx", "complex_arith",
     "wide({0}) * wide({1})"),
    ("div_complex", "lax.div({0}, {1})", CPLX, "approx", "complex_arith",
     "wide({0}) / wide({1})"),
    ("and", "lax.bitwise_and({0}, {1})", lambda d: INT(d) or d == "bool", "exact", None, None),
    ("or", "lax.bitwise_or({0}, {1})", lambda d: INT(d) or d == "bool", "exact", None, None),
    ("xor", "lax.bitwise_xor({0}, {1})", lambda d: INT(d) or d == "bool", "exact", None, None),
    ("shift_left", "lax.shift_left({0}, {1})", INT, "exact", None, None),
    ("shift_right_logical", "lax.shift_right_logical({0}, {1})", INT, "exact", None, None),
    ("shift_right_arithmetic", "lax.shift_right_arithmetic({0}, {1})", INT, "exact", None,
     None),
] + [(f"compare_{c}", f"lax.{c}({{0}}, {{1}})", ANY if c in ("eq", "ne") else
      (lambda d: d != "bool" and not CPLX(d)), "exact", None, None)
     for c in ("eq", "ne", "lt", "le", "gt", "ge")]


def _no_grad(name: str) -> bool:
    return name in ("nextafter", "copysign", "rem") or name.startswith("compare")


def _unary_generator(name, template, dtypes, kind, family, mag, differentiable):
    arith_mag = mag if kind == "arith" else None
    take = accepts(kind, arith_mag)

    def generate(ctx: Ctx):
        x = ctx.pick(lambda v: dtypes(v.dtype) and take(v))
        if x is None:
            dtype = ctx.dtype(dtypes)
            if dtype is None:
                return None
            x = ctx.new_input(ctx.shape(), dtype)
        return Candidate(name, template, (x,), kind, family,
                         mag=mag if kind == "approx" else None, arith_mag=arith_mag,
                         mag_rule="identity", differentiable=differentiable)
    generate.__name__ = f"gen_{name}"
    return generate


def _binary_generator(name, template, dtypes, kind, family, mag):
    arith_mag = mag if kind == "arith" else None
    take = accepts(kind, arith_mag)

    def generate(ctx: Ctx):
        x = ctx.pick(lambda v: dtypes(v.dtype) and take(v))
        if x is None:
            dtype = ctx.dtype(dtypes)
            if dtype is None:
                return None
            x = ctx.new_input(ctx.shape(), dtype)
        y = ctx.pick(lambda v: v.shape == x.shape and v.dtype == x.dtype and take(v))
        if y is None or ctx.chance(0.4):
            y = ctx.new_input(x.shape, x.dtype)
        operands = (y, x) if ctx.chance(0.5) else (x, y)
        if name in ("div", "rem") and INT(x.dtype) and operands[1].derived:
            # An input divides: jaxlib's compiler (the reference) dies of SIGFPE folding an
            # integer division by a zero its simplifier can prove (x ^ x, x - x).
            operands = (operands[0], ctx.new_input(x.shape, x.dtype))
        return Candidate(name, template, operands, kind, family,
                         mag=mag if kind == "approx" else None, arith_mag=arith_mag,
                         mag_rule="max", differentiable=not _no_grad(name))
    generate.__name__ = f"gen_{name}"
    return generate


for _row in UNARY:
    register(0.35, "elementwise")(_unary_generator(*_row))
for _row in BINARY:
    register(0.5, "elementwise")(_binary_generator(*_row))


@register(1.0, "elementwise")
def gen_select(ctx: Ctx):
    x = ctx.pick()
    if x is None:
        return None
    y = ctx.partner(x)
    pred = ctx.pick(lambda v: v.dtype == "bool" and v.shape == x.shape)
    if pred is None or ctx.chance(0.3):
        pred = ctx.new_input(x.shape, "bool")
    if x.rank and ctx.chance(0.2):  # a scalar predicate broadcasts
        pred = ctx.new_input((), "bool")
        return Candidate("select_scalar", "jnp.where({0}, {1}, {2})", (pred, x, y),
                         "transparent", mag_rule="same")
    return Candidate("select", "lax.select({0}, {1}, {2})", (pred, x, y), "transparent",
                     mag_rule="same")


@register(0.5, "elementwise")
def gen_clamp(ctx: Ctx):
    x = ctx.pick(lambda v: REAL(v.dtype) or INT(v.dtype))
    if x is None:
        return None
    lo = ctx.new_input((), x.dtype)
    hi = ctx.new_input((), x.dtype)
    return Candidate("clamp", "lax.clamp({0}, {1}, {2})", (lo, x, hi), "transparent",
                     mag_rule="max")


@register(0.4, "elementwise")
def gen_complex(ctx: Ctx):
    x = ctx.pick(lambda v: v.dtype in ("float32", "float64"))
    if x is None:
        return None
    y = ctx.partner(x)
    return Candidate("complex", "lax.complex({0}, {1})", (x, y), "transparent", mag_rule="max")


@register(2.0, "conversions")
def gen_convert(ctx: Ctx):
    x = ctx.pick(lambda v: v.state == "exact")
    if x is None:
        return None
    targets = [d for d in ctx.dtypes if d != x.dtype and not (CPLX(x.dtype) and not CPLX(d))]
    if not targets:
        return None
    to = ctx.choice(targets)
    return Candidate(f"convert_{_kind(x.dtype)}_to_{_kind(to)}",
                     f"lax.convert_element_type({{0}}, {dtype_source(to)})", (x,), "exact",
                     differentiable=REAL(x.dtype) and REAL(to))


@register(0.8, "conversions")
def gen_bitcast(ctx: Ctx):
    # Floats only as the program's inputs: a NaN an op returns has unspecified bits (XLA and
    # TF give max(NaN, NaN) different payloads), and the bitcast would show them.
    x = ctx.pick(lambda v: v.state == "exact" and not CPLX(v.dtype) and v.dtype != "bool"
                 and not (V.is_float(v.dtype) and v.derived))
    if x is None:
        return None
    width = V.bits(x.dtype)
    options = [d for d in ctx.dtypes if d != x.dtype and not CPLX(d) and d != "bool"
               and (V.bits(d) == width or (V.bits(d) < width) or
                    (V.bits(d) > width and x.shape and x.shape[-1] * width == V.bits(d)))]
    if not options:
        return None
    to = ctx.choice(options)
    return Candidate(f"bitcast_{_kind(x.dtype)}_to_{_kind(to)}",
                     f"lax.bitcast_convert_type({{0}}, {dtype_source(to)})", (x,), "exact",
                     differentiable=False)


@register(0.8, "elementwise")
def gen_mul_add(ctx: Ctx):
    """a * b + c (or - c): XLA fuses it into one fused multiply-add, or keeps a float16/
    bfloat16 chain in float32; TF rounds the product to the type first."""
    x = ctx.pick(lambda v: REAL(v.dtype) and v.state == "exact")
    if x is None:
        return None
    y = ctx.partner(x)
    z = ctx.partner(x)
    op = ctx.choice(["add", "sub"])
    return Candidate(f"mul_{op}", f"lax.{op}(lax.mul({{0}}, {{1}}), {{2}})", (x, y, z),
                     "approx", "fma_contraction", mag="wide({0}) * wide({1}) + wide({2})")


@register(0.5, "elementwise")
def gen_constant_arith(ctx: Ctx):
    """An op with a literal constant (scalars broadcast, as in user code: x * 2 + 1)."""
    x = ctx.pick(lambda v: (REAL(v.dtype) or INT(v.dtype)) and v.state == "exact")
    if x is None:
        return None
    value = ctx.choice([0, 1, 2, -1, 3, 0.5, -0.0, float("inf"), float("nan"), 1e-40, 255])
    if INT(x.dtype):
        value = int(value) if np.isfinite(value) else 1
        if not SIGNED(x.dtype):
            value = abs(value)
    op, template = ctx.choice([("add_const", "lax.add({0}, %s)"), ("mul_const", "lax.mul({0}, %s)"),
                               ("max_const", "lax.max({0}, %s)"), ("sub_const", "lax.sub(%s, {0})")])
    return Candidate(op, template % literal(x.dtype, value), (x,), "arith" if op != "max_const"
                     else "transparent", mag_rule="identity")


def _kind(dtype: str) -> str:
    return dtype.replace("float", "f").replace("complex", "c").replace("uint", "u").replace(
        "int", "i")
