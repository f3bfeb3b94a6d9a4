"""Generators for gather and scatter (every mode), dynamic slices, dot_general and
convolutions."""
from __future__ import annotations

import numpy as np

from tools.lax_fuzz import values as V
from tools.lax_fuzz.catalog import Candidate, Ctx, register

REAL = V.is_float


def _indices(ctx: Ctx, n: int, count: int, mode: str, unique: bool) -> np.ndarray:
    """Index values for an axis of size n: in range, negative (counted from the end) and,
    where the mode allows, out of range and extreme."""
    if unique:
        count = min(count, n)
        chosen = ctx.rng.permutation(n)[:count]
        negative = ctx.rng.random(count) < 0.3
        return np.where(negative, chosen - n, chosen).astype(np.int32)
    pool = list(range(-n, n)) if n else [0]
    if mode in ("clip", "fill", "drop"):
        pool += [n, n + 1, -n - 1, -n - 5, 2**31 - 1, -2**31, 1000]
    return ctx.rng.choice(np.array(pool, np.int64), count).astype(np.int32)


@register(2.0, "gather")
def gen_gather(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    mode = ctx.choice(["clip", "fill", "promise_in_bounds", None])
    axis = int(ctx.rng.integers(x.rank))
    n = x.shape[axis]
    if n == 0 and mode != "fill":
        return None
    shape = ctx.choice([(), (1,), (3,), (2, 2), (0,)])
    idx = ctx.new_input(shape, "int32", values=_indices(ctx, n, int(np.prod(shape)),
                                                       mode or "fill", False).reshape(shape))
    if ctx.chance(0.5) or mode is None:
        mode_arg = "" if mode is None else f", mode={mode!r}"
        return Candidate(f"take_{mode}", f"jnp.take({{0}}, {{1}}, axis={axis}{mode_arg})",
                         (x, idx), "transparent", mag_rule="same")
    fill = ", fill_value=-1" if mode == "fill" and not V.is_complex(x.dtype) and \
        x.dtype != "bool" and not V.UNSIGNED.__contains__(x.dtype) else ""
    where = ", ".join([":"] * axis + ["{1}"])
    return Candidate(f"gather_{mode}", f"{{0}}.at[{where}].get(mode={mode!r}{fill})", (x, idx),
                     "transparent", mag_rule="same")


@register(2.0, "scatter")
def gen_scatter(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    kind = ctx.choice(["set", "add", "mul", "min", "max"])
    if x.dtype == "bool" and kind in ("add", "mul"):
        return None
    if V.is_complex(x.dtype) and kind in ("min", "max"):
        return None
    mode = ctx.choice(["clip", "drop", "promise_in_bounds", None])
    n = x.shape[0]
    count = int(ctx.choice([1, 2, 3, 5]))
    unique = kind == "set"
    if n == 0 or (unique and mode == "clip"):
        mode = "drop" if n == 0 else mode
    values = _indices(ctx, n, count, mode or "drop", unique or (mode == "clip" and unique))
    if unique and mode == "drop" and ctx.chance(0.5):
        values = np.concatenate([values, np.array([n + 3, -n - 9], np.int32)])
    idx = ctx.new_input(values.shape, "int32", values=values)
    upd = ctx.pick(lambda v: v.dtype == x.dtype and v.shape == values.shape + x.shape[1:])
    if upd is None or ctx.chance(0.5):
        upd = ctx.new_input(values.shape + x.shape[1:], x.dtype)
    mode_arg = "" if mode is None else f", mode={mode!r}"
    template = f"{{0}}.at[{{1}}].{kind}({{2}}{mode_arg})"
    if kind in ("min", "max") or kind == "set":
        mag_template = f"{{0}}.at[{{1}}].{'set' if kind == 'set' else 'max'}({{2}}{mode_arg})"
        return Candidate(f"scatter_{kind}_{mode}", template, (x, idx, upd), "transparent",
                         mag_rule="same", mag=mag_template)
    if x.state != "exact" or upd.state != "exact":
        return None
    if REAL(x.dtype) or V.is_complex(x.dtype):
        mag = (f"{count + 1} * wide({{0}}).at[{{1}}].add(wide({{2}}){mode_arg})" if kind == "add"
               else f"{count + 1} * wide({{0}}.at[{{1}}].mul({{2}}{mode_arg}))")
        return Candidate(f"scatter_{kind}_{mode}", template, (x, idx, upd), "approx",
                         "reassociation", mag=mag, differentiable=kind == "add")
    return Candidate(f"scatter_{kind}_{mode}", template, (x, idx, upd), "exact",
                     differentiable=False)


@register(1.0, "gather")
def gen_dynamic_slice(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    starts = [ctx.new_input((), "int32", values=ctx.choice([0, 1, -1, 2, 7, -2**31, 2**31 - 1]))
              for _ in x.shape]
    sizes = tuple(int(ctx.rng.integers(0, d + 1)) for d in x.shape)
    names = ", ".join(f"{{{i + 1}}}" for i in range(len(starts)))
    if ctx.chance(0.5):
        return Candidate("dynamic_slice", f"lax.dynamic_slice({{0}}, ({names},), {sizes})",
                         (x, *starts), "transparent", mag_rule="same")
    upd = ctx.new_input(sizes, x.dtype)
    k = len(starts) + 1
    return Candidate("dynamic_update_slice",
                     f"lax.dynamic_update_slice({{0}}, {{{k}}}, ({names},))",
                     (x, *starts, upd), "transparent", mag_rule="same")


@register(1.5, "contractions")
def gen_dot_general(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank >= 1 and v.dtype != "bool" and v.state == "exact")
    if x is None:
        return None
    contract = ctx.axes(x.rank)
    free = [a for a in range(x.rank) if a not in contract]
    batch = tuple(a for a in free if ctx.chance(0.3))
    rhs_free = tuple(int(ctx.choice([1, 2, 3])) for _ in range(int(ctx.rng.integers(0, 3))))
    rhs_shape = tuple(x.shape[a] for a in batch) + tuple(x.shape[a] for a in contract) + rhs_free
    if int(np.prod(rhs_shape)) > 64:
        return None
    y = ctx.partner(x, shape=rhs_shape)
    if y.state != "exact":
        return None
    nb = len(batch)
    rhs_contract = tuple(range(nb, nb + len(contract)))
    dims = ((tuple(contract), rhs_contract), (batch, tuple(range(nb))))
    template = f"lax.dot_general({{0}}, {{1}}, {dims})"
    k = max(1, int(np.prod([x.shape[a] for a in contract])))
    if REAL(x.dtype) or V.is_complex(x.dtype):
        return Candidate("dot_general", template, (x, y), "approx", "reassociation",
                         mag=f"{k} * lax.dot_general(wide({{0}}), wide({{1}}), {dims})")
    return Candidate("dot_general_int", template, (x, y), "exact", differentiable=False)


@register(1.5, "contractions")
def gen_conv(ctx: Ctx):
    dtype = ctx.dtype(lambda d: REAL(d) or d in ("int32", "int8"))
    if dtype is None:
        return None
    spatial = int(ctx.choice([1, 2]))
    groups = int(ctx.choice([1, 1, 2]))
    cin, cout = groups * int(ctx.choice([1, 2])), groups * int(ctx.choice([1, 2]))
    size = tuple(int(ctx.choice([1, 3, 4, 5])) for _ in range(spatial))
    kernel = tuple(int(ctx.choice([1, 2, 3])) for _ in range(spatial))
    batch = int(ctx.choice([1, 2]))
    layout = ctx.choice(["channels_last", "channels_first"])
    if layout == "channels_last":
        names = ("NWC", "WIO", "NWC") if spatial == 1 else ("NHWC", "HWIO", "NHWC")
        lhs_shape, rhs_shape = (batch, *size, cin), (*kernel, cin // groups, cout)
    else:
        names = ("NCW", "OIW", "NCW") if spatial == 1 else ("NCHW", "OIHW", "NCHW")
        lhs_shape, rhs_shape = (batch, cin, *size), (cout, cin // groups, *kernel)
    lhs = ctx.pick(lambda v: v.shape == lhs_shape and v.dtype == dtype and v.state == "exact")
    lhs = lhs or ctx.new_input(lhs_shape, dtype)
    rhs = ctx.new_input(rhs_shape, dtype)
    strides = tuple(int(ctx.choice([1, 1, 2])) for _ in range(spatial))
    padding = ctx.choice(["'SAME'", "'VALID'", tuple((int(ctx.rng.integers(-1, 3)),
                                                      int(ctx.rng.integers(0, 3)))
                                                     for _ in range(spatial))])
    lhs_dil = tuple(int(ctx.choice([1, 1, 2])) for _ in range(spatial))
    rhs_dil = tuple(int(ctx.choice([1, 1, 2])) for _ in range(spatial))
    if isinstance(padding, str):
        lhs_dil = (1,) * spatial
    args = (f"{strides}, {padding}, {lhs_dil}, {rhs_dil}, {names}, "
            f"feature_group_count={groups}")
    template = f"lax.conv_general_dilated({{0}}, {{1}}, {args})"
    k = int(np.prod(kernel)) * (cin // groups)
    if REAL(dtype):
        return Candidate("conv", template, (lhs, rhs), "approx", "reassociation",
                         mag=f"{k} * lax.conv_general_dilated(wide({{0}}), wide({{1}}), {args})")
    return Candidate("conv_int", template, (lhs, rhs), "exact", differentiable=False)


# A layer as JAX users write one: a product, a bias broadcast by jnp's `+` (a `[1, c]` reshape,
# then broadcast_in_dim over the batch) and an activation. TF's Grappler fuses exactly this
# into oneDNN's kernels (whose ReLU made NaN 0 once); the ops one by one never met that.
_ACTIVATIONS = {"relu": "jax.nn.relu({})", "relu6": "jax.nn.relu6({})", "linear": "{}"}


def _layer(ctx: Ctx, kind: str, x, w, product: str, channels: int, k: int):
    bias = ctx.new_input((channels,), x.dtype, parameter=True)
    act = ctx.choice(sorted(_ACTIVATIONS))
    template = _ACTIVATIONS[act].format(f"{product.format('{0}', '{1}')} + {{2}}")
    mag = f"{k} * {product.format('wide({0})', 'wide({1})')} + wide({{2}})"
    return Candidate(f"{kind}_layer_{act}", template, (x, w, bias), "approx", "reassociation",
                     mag=mag)


@register(1.0, "contractions")
def gen_dense_layer(ctx: Ctx):
    x = ctx.pick(lambda v: v.rank == 2 and REAL(v.dtype) and v.state == "exact")
    if x is None:
        dtype = ctx.dtype(REAL)
        if dtype is None:
            return None
        x = ctx.new_input((int(ctx.choice([1, 2, 3])), int(ctx.choice([1, 2, 4]))), dtype,
                          style="edge")
    units = int(ctx.choice([1, 2, 3, 4]))
    w = ctx.new_input((x.shape[1], units), x.dtype, parameter=True)
    return _layer(ctx, "dense", x, w, "jnp.matmul({}, {})", units, max(1, x.shape[1]))


@register(1.0, "contractions")
def gen_conv_layer(ctx: Ctx):
    dtype = ctx.dtype(REAL)
    if dtype is None:
        return None
    cin, cout = int(ctx.choice([1, 2, 3])), int(ctx.choice([1, 2, 4]))
    size = (int(ctx.choice([1, 3, 4])), int(ctx.choice([1, 3, 4])))
    shape = (int(ctx.choice([1, 2])), *size, cin)
    x = ctx.pick(lambda v: v.shape == shape and v.dtype == dtype and v.state == "exact")
    x = x or ctx.new_input(shape, dtype, style="edge")
    w = ctx.new_input((3, 3, cin, cout), dtype, style="small",  # finite: see known.py
                      parameter=True)
    product = ("lax.conv_general_dilated({}, {}, (1, 1), 'SAME', "
               "dimension_numbers=('NHWC', 'HWIO', 'NHWC'))")
    return _layer(ctx, "conv", x, w, product, cout, 9 * cin)
