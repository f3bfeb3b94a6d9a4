"""Generators for control flow (while_loop, fori_loop, scan, cond, switch), random bits and
FFTs."""
from __future__ import annotations

import numpy as np

from tools.lax_fuzz import values as V
from tools.lax_fuzz.catalog import Candidate, Ctx, dtype_source, register

REAL = V.is_float
WIDE_ENOUGH = lambda d: d in ("float32", "float64") or V.is_int(d)

# Exact bodies: one arithmetic step of the carry, per dtype class ("v" is the carry).
# No multiply feeds an add: XLA would fuse the two (one rounding), TF rounds each.
_FLOAT_BODIES = ["lax.add(v, v)", "lax.mul(v, lax.neg(v))", "lax.max(v, lax.floor(v))",
                 "lax.mul(lax.sub(v, jnp.array(1, v.dtype)), v)",
                 "lax.div(v, jnp.array(3, v.dtype))",
                 "lax.select(v > 0, lax.sqrt(v), lax.neg(v))"]
_INT_BODIES = ["lax.add(v, v)", "lax.mul(v, v)", "lax.bitwise_xor(v, lax.shift_left(v, "
               "jnp.array(1, v.dtype)))", "lax.sub(v, jnp.array(3, v.dtype))",
               "lax.max(v, lax.neg(v))"]


def _body(ctx: Ctx, dtype: str) -> str:
    return ctx.choice(_FLOAT_BODIES if REAL(dtype) else _INT_BODIES)


@register(1.0, "control_flow")
def gen_while(ctx: Ctx):
    x = ctx.pick(lambda v: WIDE_ENOUGH(v.dtype) and v.state == "exact")
    if x is None:
        return None
    trips = ctx.new_input((), "int32", values=ctx.choice([0, 1, 2, 3, -1, 2**31 - 1]))
    body = _body(ctx, x.dtype)
    template = (f"lax.while_loop(lambda c: c[0] < jnp.minimum({{1}}, 4), "
                f"lambda c: (c[0] + 1, (lambda v: {body})(c[1])), (jnp.int32(0), {{0}}))[1]")
    return Candidate("while_loop", template, (x, trips), "arith", differentiable=False,
                     product=True)


@register(0.8, "control_flow")
def gen_fori(ctx: Ctx):
    x = ctx.pick(lambda v: WIDE_ENOUGH(v.dtype) and v.state == "exact")
    if x is None:
        return None
    n = int(ctx.choice([0, 1, 2, 3]))
    body = _body(ctx, x.dtype)
    # XLA unrolls a loop of one trip: its multiply may then fuse with a following add.
    return Candidate("fori_loop", f"lax.fori_loop(0, {n}, lambda i, v: {body}, {{0}})", (x,),
                     "arith", product=True)


@register(1.0, "control_flow")
def gen_scan(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1 and WIDE_ENOUGH(v.dtype) and v.state == "exact")
    if x is None:
        return None
    step = ctx.choice(["lax.add(c, xi)", "lax.max(c, xi)", "lax.mul(c, xi)",
                       "lax.sub(xi, c)"])
    which = ctx.choice(["[0]", "[1]"])
    reverse = ctx.chance(0.3)
    template = (f"lax.scan(lambda c, xi: ({step}, c), jnp.zeros_like({{0}}[0]), {{0}}, "
                f"reverse={reverse}){which}")
    # A max step is named: TF's XLA drops NaN in it (known.TF_XLA).
    return Candidate("scan_max" if "max" in step else "scan", template, (x,), "arith",
                     product=True)


@register(1.0, "control_flow")
def gen_cond(ctx: Ctx):
    x = ctx.pick(lambda v: WIDE_ENOUGH(v.dtype) and v.state == "exact")
    if x is None:
        return None
    a, b = _body(ctx, x.dtype), _body(ctx, x.dtype)
    if ctx.chance(0.5):
        pred = ctx.new_input((), "bool")
        template = f"lax.cond({{1}}, lambda v: {a}, lambda v: {b}, {{0}})"
        return Candidate("cond", template, (x, pred), "arith", product=True)
    index = ctx.new_input((), "int32", values=ctx.choice([0, 1, 2, -1, 5]))
    c = _body(ctx, x.dtype)
    template = f"lax.switch({{1}}, [lambda v: {a}, lambda v: {b}, lambda v: {c}], {{0}})"
    return Candidate("switch", template, (x, index), "arith", product=True)


@register(1.0, "random")
def gen_random(ctx: Ctx):
    key = ctx.new_input((2,), "uint32", style=ctx.choice(["normal", "special"]))
    shape = ctx.shape(max_size=24)
    kind = ctx.choice(["bits", "uniform", "normal", "randint", "split", "bernoulli",
                       "permutation"])
    k = "jax.random.wrap_key_data({0}, impl='threefry2x32')"
    if kind == "bits":
        dtype = ctx.dtype(lambda d: d in V.UNSIGNED) or "uint32"
        return Candidate("random_bits", f"jax.random.bits({k}, {shape}, "
                                        f"{dtype_source(dtype)})", (key,), "exact",
                         differentiable=False)
    if kind == "uniform":
        dtype = ctx.dtype(REAL) or "float32"
        return Candidate("random_uniform", f"jax.random.uniform({k}, {shape}, "
                                           f"{dtype_source(dtype)})", (key,), "exact")
    if kind == "normal":
        dtype = ctx.dtype(lambda d: d in ("float32", "float64")) or "float32"
        template = f"jax.random.normal({k}, {shape}, {dtype_source(dtype)})"
        return Candidate("random_normal", template, (key,), "approx", "special",
                         mag=f"1 + wide({template})")
    if kind == "randint":
        return Candidate("random_randint", f"jax.random.randint({k}, {shape}, -5, 7)", (key,),
                         "exact")
    if kind == "split":
        return Candidate("random_split", f"jax.random.key_data(jax.random.split({k}, 3))",
                         (key,), "exact")
    if kind == "bernoulli":
        return Candidate("random_bernoulli", f"jax.random.bernoulli({k}, 0.25, {shape})",
                         (key,), "exact")
    n = int(ctx.choice([1, 3, 8]))
    return Candidate("random_permutation", f"jax.random.permutation({k}, {n})", (key,),
                     "exact")


@register(0.6, "random")
def gen_rng_bit_generator(ctx: Ctx):
    key = ctx.new_input((4,), "uint32", style=ctx.choice(["normal", "special"]))
    shape = ctx.shape(max_size=24)
    algorithm = ctx.choice(["THREE_FRY", "PHILOX", "DEFAULT"])
    dtype = ctx.dtype(lambda d: d in V.UNSIGNED) or "uint32"
    which = ctx.choice(["[0]", "[1]"])
    return Candidate(f"rng_bit_generator_{algorithm.lower()}",
                     f"lax.rng_bit_generator({{0}}, {shape}, {dtype_source(dtype)}, "
                     f"lax.RandomAlgorithm.RNG_{algorithm}){which}", (key,), "exact",
                     differentiable=False)


@register(1.0, "fft")
def gen_fft(ctx: Ctx):
    kind = ctx.choice(["fft", "ifft", "rfft", "irfft", "fft2"])
    real = kind == "rfft"
    x = ctx.pick(lambda v: v.rank >= 1 and v.state == "exact" and (
        v.dtype in ("float32", "float64") if real else V.is_complex(v.dtype)))
    if x is None:
        dtype = ctx.dtype(lambda d: d in ("float32", "float64") if real else V.is_complex(d))
        if dtype is None:
            return None
        x = ctx.new_input(ctx.shape(rank=int(ctx.choice([1, 2, 3]))), dtype)
    if kind == "fft2" and x.rank < 2:
        kind = "fft"
    axes = (-2, -1) if kind == "fft2" else (-1,)
    n = int(np.prod([x.shape[a] for a in axes]))
    if n == 0 or (kind == "irfft" and x.shape[-1] < 2):
        return None
    template = f"jnp.fft.{kind}({{0}})" if kind != "fft2" else "jnp.fft.fft2({0})"
    mag = (f"{n + 1} * jnp.broadcast_to(jnp.sum(wide({{0}}), axis={axes}, keepdims=True), "
           f"OUT_SHAPE)")
    if kind in ("rfft", "irfft"):
        mag = f"{2 * n + 2} * jnp.full(OUT_SHAPE, jnp.max(jnp.sum(wide({{0}}), axis=-1), initial=0.0))"
    return Candidate(kind, template, (x,), "approx", "reassociation", mag=mag)
