"""Generators for shapes and data movement, reductions, windows and pooling, cumulative ops,
sort, top_k and argmax."""
from __future__ import annotations

import numpy as np

from tools.lax_fuzz import values as V
from tools.lax_fuzz.catalog import Candidate, Ctx, literal, register

REAL = V.is_float


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


# ------------------------------------------------------------------ shapes (transparent)

@register(0.8, "shapes")
def gen_reshape(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    n = x.size
    options = [(n,), (1, n), (n, 1)]
    for d in (2, 3, 4):
        if n and n % d == 0:
            options += [(d, n // d), (n // d, d)]
    target = ctx.choice(options)
    return Candidate("reshape", f"jnp.reshape({{0}}, {target})", (x,), "transparent")


@register(0.8, "shapes")
def gen_transpose(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 2)
    if x is None:
        return None
    perm = tuple(int(p) for p in ctx.rng.permutation(x.rank))
    return Candidate("transpose", f"lax.transpose({{0}}, {perm})", (x,), "transparent")


@register(0.6, "shapes")
def gen_broadcast(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank <= 3 and v.size <= 16)
    if x is None:
        return None
    where = int(ctx.rng.integers(x.rank + 1))
    new = int(ctx.choice([1, 2, 3]))
    shape = x.shape[:where] + (new,) + x.shape[where:]
    dims = tuple(i for i in range(len(shape)) if i != where)
    return Candidate("broadcast_in_dim", f"lax.broadcast_in_dim({{0}}, {shape}, {dims})", (x,),
                     "transparent")


@register(0.8, "shapes")
def gen_slice(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    start, limit, strides = [], [], []
    for d in x.shape:
        a = int(ctx.rng.integers(0, d + 1))
        b = int(ctx.rng.integers(a, d + 1))
        start.append(a)
        limit.append(b)
        strides.append(int(ctx.choice([1, 1, 2, 3])))
    return Candidate("slice", f"lax.slice({{0}}, {tuple(start)}, {tuple(limit)}, "
                              f"{tuple(strides)})", (x,), "transparent")


@register(0.8, "shapes")
def gen_pad(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    config = tuple((int(ctx.rng.integers(-2, 3)), int(ctx.rng.integers(-2, 3)),
                    int(ctx.choice([0, 0, 1, 2]))) for _ in x.shape)
    value = ctx.choice([0, 1, "-0.0", "nan", "-inf"]) if V.is_float(x.dtype) else \
        ctx.choice([0, 1])
    pad = (f"jnp.array({value}, {{0}}.dtype)" if x.dtype != "bool"
           else f"jnp.array({bool(value)})")
    return Candidate("pad", f"lax.pad({{0}}, {pad}, {config})", (x,), "transparent")


@register(0.7, "shapes")
def gen_concatenate(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    axis = int(ctx.rng.integers(x.rank))
    shape = list(x.shape)
    shape[axis] = int(ctx.choice([0, 1, 2, 3]))
    y = ctx.partner(x, shape=shape)
    operands = (x, y) if ctx.chance(0.5) else (y, x)
    return Candidate("concatenate", f"lax.concatenate([{{0}}, {{1}}], {axis})", operands,
                     "transparent")


@register(0.5, "shapes")
def gen_rev(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    dims = ctx.axes(x.rank, allow_empty=False)
    return Candidate("rev", f"lax.rev({{0}}, {dims})", (x,), "transparent")


@register(0.4, "shapes")
def gen_squeeze_expand(ctx: Ctx):
    x = ctx.pick()
    if x is None:
        return None
    ones = tuple(i for i, d in enumerate(x.shape) if d == 1)
    if ones and ctx.chance(0.5):
        return Candidate("squeeze", f"lax.squeeze({{0}}, {ones})", (x,), "transparent")
    where = int(ctx.rng.integers(x.rank + 1))
    return Candidate("expand_dims", f"lax.expand_dims({{0}}, ({where},))", (x,), "transparent")


@register(0.4, "shapes")
def gen_iota_add(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1 and (REAL(v.dtype) or V.is_int(v.dtype))
                 and v.state == "exact")
    if x is None:
        return None
    dim = int(ctx.rng.integers(x.rank))
    return Candidate("iota_add", f"lax.add({{0}}, lax.broadcasted_iota({{0}}.dtype, "
                                 f"{{0}}.shape, {dim}))", (x,), "arith")


# ------------------------------------------------------------------ reductions

@register(2.0, "reductions")
def gen_reduce(ctx: Ctx):
    x = ctx.pick(lambda v: v.state == "exact" or ctx.chance(0.3))
    if x is None:
        return None
    axes = ctx.axes(x.rank)
    n = _size([x.shape[a] for a in axes])
    kinds = ["max", "min"]
    if x.state == "exact":
        kinds += ["sum", "sum", "prod"] if x.dtype != "bool" else []
        kinds += ["and", "or", "xor"] if V.is_int(x.dtype) or x.dtype == "bool" else []
        kinds += ["argmax", "argmin"] if x.rank and x.dtype != "bool" and \
            not V.is_complex(x.dtype) else []
    if V.is_complex(x.dtype):
        kinds = [k for k in kinds if k in ("sum", "prod")]
    if not kinds:
        return None
    kind = ctx.choice(kinds)
    if kind in ("argmax", "argmin"):
        axis = int(ctx.rng.integers(x.rank))
        if x.shape[axis] == 0:
            return None
        return Candidate(kind, f"lax.{kind}({{0}}, {axis}, np.int32)", (x,), "exact",
                         differentiable=True)
    template = f"lax.reduce_{kind}({{0}}, {axes})"
    if kind in ("max", "min"):
        return Candidate(f"reduce_{kind}", template, (x,), "transparent",
                         mag=None, mag_rule="same") if kind == "max" else \
            Candidate("reduce_min", template, (x,), "transparent", mag_rule="norm")
    if kind in ("sum", "prod") and V.is_float(x.dtype) or V.is_complex(x.dtype):
        mag = (f"{max(n, 1)} * lax.reduce_sum(wide({{0}}), {axes})" if kind == "sum" else
               # the product of the magnitudes (infinite where the terms overflow), not the
               # magnitude of the product (NaN where a complex product overflows)
               f"{max(n, 1)} * lax.reduce_prod(wide({{0}}), {axes})")
        return Candidate(f"reduce_{kind}", template, (x,), "approx", "reassociation", mag=mag)
    return Candidate(f"reduce_{kind}", template, (x,), "exact",
                     differentiable=kind in ("sum", "prod"))


# ------------------------------------------------------------------ windows and pooling

def _window(ctx: Ctx, x):
    dims, strides, base, dilation, padding = [], [], [], [], []
    for d in x.shape:
        dims.append(int(ctx.choice([1, 1, 2, 3])))
        strides.append(int(ctx.choice([1, 1, 2, 3])))
        base.append(int(ctx.choice([1, 1, 1, 2])))
        dilation.append(int(ctx.choice([1, 1, 1, 2])))
        padding.append((int(ctx.rng.integers(0, 3)), int(ctx.rng.integers(0, 3))))
    pad = ctx.choice(["'VALID'", "'SAME'", tuple(padding)])
    if isinstance(pad, str):
        base = [1] * len(base)  # SAME/VALID padding strings are for undilated bases
    return tuple(dims), tuple(strides), pad, tuple(base), tuple(dilation)


@register(2.0, "windows")
def gen_reduce_window(ctx: Ctx):
    x = ctx.pick(lambda v: 1 <= v.rank <= 4 and v.dtype != "bool" and not V.is_complex(v.dtype))
    if x is None:
        return None
    dims, strides, pad, base, dilation = _window(ctx, x)
    kinds = ["max", "min"] + (["sum", "avg"] if x.state == "exact" else [])
    kind = ctx.choice(kinds)
    args = f"{dims}, {strides}, {pad}, {base}, {dilation}"
    if kind in ("max", "min"):
        if REAL(x.dtype):
            init = f"jnp.array({'-inf' if kind == 'max' else 'inf'}, {{0}}.dtype)"
        else:
            info = np.iinfo(x.dtype)
            init = literal(x.dtype, int(info.min if kind == "max" else info.max))
        template = f"lax.reduce_window({{0}}, {init}, lax.{kind}, {args})"
        return Candidate(f"reduce_window_{kind}", template, (x,), "transparent",
                         mag_rule="same" if kind == "max" else "norm")
    window = _size(dims)
    summed = f"lax.reduce_window({{0}}, jnp.array(0, {{0}}.dtype), lax.add, {args})"
    mag = f"{window} * lax.reduce_window(wide({{0}}), 0.0, lax.add, {args})"
    if kind == "avg":
        summed = f"lax.div({summed}, jnp.array({window}, {{0}}.dtype))"
        if not REAL(x.dtype):
            return None
    if not REAL(x.dtype):
        return Candidate("reduce_window_sum", summed, (x,), "exact")
    return Candidate(f"reduce_window_{kind}", summed, (x,), "approx", "reassociation", mag=mag)


@register(1.5, "cumulative")
def gen_cumulative(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1 and v.dtype != "bool" and not V.is_complex(v.dtype))
    if x is None:
        return None
    axis = int(ctx.rng.integers(x.rank))
    reverse = ctx.chance(0.3)
    kinds = ["max", "min"] + (["sum", "sum", "prod"] if x.state == "exact" else [])
    if x.state == "exact" and REAL(x.dtype):
        kinds.append("logsumexp")
    kind = ctx.choice(kinds)
    template = f"lax.cum{kind}({{0}}, {axis}, {reverse})"
    n = max(x.shape[axis], 1)
    if kind in ("max", "min"):
        return Candidate(f"cum{kind}", template, (x,), "transparent", mag_rule="norm")
    if not REAL(x.dtype):
        return Candidate(f"cum{kind}", template, (x,), "exact")
    mag = {"sum": f"{n} * lax.cumsum(wide({{0}}), {axis}, {reverse})",
           "prod": f"{n} * wide(lax.cumprod({{0}}, {axis}, {reverse}))",
           "logsumexp": f"{n + 2} * (1 + wide(lax.cumlogsumexp({{0}}, {axis}, {reverse})))"}[kind]
    return Candidate(f"cum{kind}", template, (x,), "approx", "reassociation", mag=mag)


# ------------------------------------------------------------------ sort, top_k

@register(1.5, "sort")
def gen_sort(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    dim = int(ctx.rng.integers(x.rank))
    kind = ctx.choice(["values", "values", "argsort", "pair", "top_k", "top_k_indices"])
    if kind == "values" or x.state != "exact" and kind != "top_k":
        stable = ctx.chance(0.5)
        return Candidate("sort", f"lax.sort({{0}}, {dim}, {stable})", (x,), "transparent",
                         mag_rule="norm")
    if V.is_complex(x.dtype) and kind.startswith("top_k"):
        return None
    if kind == "argsort":
        return Candidate("argsort", f"jnp.argsort({{0}}, axis={dim}, stable=True)", (x,),
                         "exact")
    if kind == "pair":
        other = ctx.partner(x, dtype=ctx.dtype(lambda d: d != "bool") or "int32")
        if other.state != "exact":
            return None
        pick = int(ctx.choice([0, 1]))
        return Candidate("sort_pair", f"lax.sort(({{0}}, {{1}}), {dim}, True, 1)[{pick}]",
                         (x, other), "exact")
    if x.shape[-1] == 0:
        return None
    k = int(ctx.rng.integers(1, x.shape[-1] + 1))
    if kind == "top_k":
        return Candidate("top_k", f"lax.top_k({{0}}, {k})[0]", (x,), "transparent",
                         mag_rule="norm")
    return Candidate("top_k_indices", f"lax.top_k({{0}}, {k})[1]", (x,), "exact")
