"""Random programs: a few steps drawn from the op generators (`catalog.REGISTRY`), each
checked by `jax.eval_shape` as it is added, with each value's contract state carried along
(see `catalog`), then symbolic dimensions where the program allows them."""
from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np

from tools.lax_fuzz import (  # noqa: F401  (register)
    catalog,
    ops_control,
    ops_elementwise,
    ops_indexing,
    ops_structured,
)
from tools.lax_fuzz import program as program_lib
from tools.lax_fuzz import values as values_lib
from tools.lax_fuzz.catalog import Candidate, Ctx, Val
from tools.lax_fuzz.program import Output, Program, Step

MAX_ELEMENTS = 256
_SIXTEEN = ("float16", "bfloat16")
_FIRST_DTYPE_WEIGHTS = {"float32": 6, "float16": 1.5, "bfloat16": 1.5, "float64": 2,
                        "complex64": 1, "complex128": 0.5, "int32": 2, "int8": 1, "int16": 0.5,
                        "int64": 1, "uint8": 1, "uint32": 1, "uint16": 0.5, "uint64": 0.5,
                        "bool": 1}


def dtypes_for(x64: bool) -> tuple[str, ...]:
    return tuple(d for d in values_lib.ALL if x64 or d not in values_lib.WIDE)


def generate(rng: np.random.Generator, *, x64: bool, polymorphic: float = 0.0,
             max_steps: int = 4, derivatives: float = 0.5) -> Program:
    """One random program (retried until one with at least one step comes out).

    Args:
      rng: the random stream (the program is a function of it).
      x64: whether 64-bit dtypes may appear (the caller runs it under `jax.enable_x64`).
      polymorphic: the probability of trying symbolic dimensions.
      max_steps: the most ops in the program.
      derivatives: the probability of checking jvp and TF gradients where possible.
    """
    while True:
        made = _try_generate(rng, x64, max_steps)
        if made is not None:
            break
    made.jvp = made.grad = bool(rng.random() < derivatives) and _differentiable(made)
    if rng.random() < polymorphic:
        _make_symbolic(rng, made)
    if made.grad or any(s.families for s in made.steps):
        _no_subnormal_inputs(made)
    return made


def _no_subnormal_inputs(made: Program) -> None:
    """Subnormal inputs become the smallest normal value of their sign, in programs with a
    tolerated (approximate) op or derivative checks: jaxlib's XLA, TF's XLA and TF's kernels
    flush subnormal operands to zero at different points inside such functions, which the
    contract leaves out (docs/exactness.md); programs of exact ops keep them."""
    for name, value in made.inputs.items():
        kind = value.dtype
        if not (values_lib.is_float(kind.name) or values_lib.is_complex(kind.name)):
            continue
        parts = [value] if values_lib.is_float(kind.name) else [value.real, value.imag]
        fixed = []
        for part in parts:
            tiny = float(ml_dtypes.finfo(part.dtype).smallest_normal)
            wide = part.astype(np.float64)
            sub = (wide != 0) & (np.abs(wide) < tiny)
            fixed.append(np.where(sub, np.copysign(tiny, wide), wide).astype(part.dtype))
        made.inputs[name] = fixed[0] if len(fixed) == 1 else program_lib.complex_array(*fixed)


def _try_generate(rng, x64: bool, max_steps: int) -> Program | None:
    ctx = Ctx(rng, x64, dtypes_for(x64))
    names = list(_FIRST_DTYPE_WEIGHTS)
    weights = np.array([_FIRST_DTYPE_WEIGHTS[d] if d in ctx.dtypes else 0.0 for d in names])
    first = names[int(rng.choice(len(names), p=weights / weights.sum()))]
    x = ctx.new_input(ctx.shape(), first)
    if rng.random() < 0.4:
        ctx.new_input(x.shape, first)
    generators = catalog.REGISTRY
    gen_weights = np.array([w for w, _, _ in generators])
    steps: list[Step] = []
    differentiable = True
    wanted = int(rng.integers(1, max_steps + 1))
    for _ in range(wanted * 8):
        if len(steps) == wanted:
            break
        _, _, gen = generators[int(rng.choice(len(generators), p=gen_weights / gen_weights.sum()))]
        candidate = gen(ctx)
        if candidate is None:
            continue
        added = _add(ctx, candidate, f"v{len(steps)}")
        if added is None:
            continue
        steps.append(added)
        differentiable &= candidate.differentiable
    if not steps:
        return None
    derived = [v for v in ctx.pool if v.derived]
    chosen = [derived[-1]]
    if len(derived) > 1 and rng.random() < 0.3:
        other = derived[int(rng.integers(len(derived) - 1))]
        chosen.append(other)
    outputs = [Output(v.name, tuple(sorted(v.families)), v.mag, v.dtype, v.shape)
               for v in chosen]
    made = Program(dict(ctx.inputs), {}, steps, outputs, x64=x64,
                   parameters=frozenset(ctx.parameters))
    made.grad = differentiable  # a provisional mark, settled by `generate`
    made = _prune(made)
    try:  # the companions' own shapes (an empty reduction, ...)
        jax.eval_shape(made.function(mags=True), *specs(made))
    except Exception:
        return None
    return made


def _add(ctx: Ctx, cand: Candidate, target: str) -> Step | None:
    """Checks the candidate's contract state and shape; adds its value to the pool."""
    data = [v for v in cand.operands if v.is_inexact]
    kind = cand.kind
    product = cand.product or cand.op in catalog.PRODUCTS
    adds = cand.adds or cand.op in catalog.ADDS
    # A float32/64 product counts as unrounded only for an add (see `catalog`).
    states = {("unrounded" if v.dtype in _SIXTEEN or adds else "exact")
              if v.state == "unrounded" else v.state for v in data}
    if kind in ("exact", "approx") and states - {"exact"}:
        return None
    if kind == "arith" and "approx" in states:
        return None
    if kind == "transparent" and {"approx", "unrounded"} <= states:
        return None
    if kind == "transparent":  # it keeps unrounded products as they are
        states = {v.state for v in data}
        if {"approx", "unrounded"} <= states:
            return None
    names = [v.name for v in cand.operands]
    try:
        aval = _eval_shape(cand.template, cand.operands)
    except Exception:  # an invalid combination the generator proposed: draw another
        return None
    if not hasattr(aval, "shape") or int(np.prod(aval.shape, dtype=np.int64)) > MAX_ELEMENTS:
        return None
    dtype = np.dtype(aval.dtype).name
    if dtype not in values_lib.ALL:
        return None
    sixteen = dtype in _SIXTEEN
    state, families, mag = "exact", frozenset(), None
    if kind == "arith" and "unrounded" in states:
        if not cand.arith_mag:
            return None
        family = "excess_precision" if sixteen else "fma_contraction"
        state, families, mag = "approx", frozenset({family}), cand.arith_mag.format(*names)
    elif kind == "arith":
        state = "unrounded" if sixteen or (product and dtype in ("float32", "float64")) \
            else "exact"
    elif kind == "approx":
        family = cand.family
        if family == "reassociation" and values_lib.is_complex(dtype):
            family = "complex_reassociation"
        if family == "fma_contraction" and sixteen:
            family = "excess_precision"
        state, families = "approx", frozenset({family})
        mag = cand.mag.format(*names) if cand.mag else None
    elif kind == "transparent" and "approx" in states:
        state = "approx"
        families = frozenset().union(*(v.families for v in data))
        mag = _transparent_mag(cand, aval.shape) if any(v.mag for v in data) else None
    elif kind == "transparent" and "unrounded" in states:
        state = "unrounded"
    if mag is not None:
        mag = mag.replace("OUT_SHAPE", str(tuple(aval.shape)))
    ctx.pool.append(Val(target, tuple(aval.shape), dtype, state, families,
                        target if mag else None, derived=True))
    return Step(target, cand.template, tuple(names), cand.op, mag, tuple(sorted(families)),
                dtype, tuple(aval.shape))


def _companion(v: Val) -> str:
    if not v.is_inexact:
        return v.name
    return f"m_{v.mag}" if v.mag else f"jnp.zeros_like(wide({v.name}))"


def _transparent_mag(cand: Candidate, shape) -> str:
    data = [v for v in cand.operands if v.is_inexact]
    if cand.mag_rule == "identity":
        return f"m_{next(v.mag for v in data if v.mag)}"
    if cand.mag_rule == "max":
        parts = [_companion(v) for v in data]
        text = parts[0]
        for part in parts[1:]:
            text = f"jnp.maximum({text}, {part})"
        return f"jnp.broadcast_to({text}, {tuple(shape)})"
    if cand.mag_rule == "norm":
        tops = ", ".join(f"jnp.max(m_{v.mag}, initial=0.0)" for v in data if v.mag)
        return f"jnp.full({tuple(shape)}, jnp.max(jnp.array([{tops}])))"
    return (cand.mag or cand.template).format(*[_companion(v) for v in cand.operands])


def _eval_shape(template: str, operands) -> jax.ShapeDtypeStruct:
    unique = list(dict.fromkeys(v.name for v in operands))
    source = f"def g({', '.join(unique)}):\n    return {template.format(*[v.name for v in operands])}\n"
    fn = program_lib.compile_source(source)
    by_name = {v.name: v for v in operands}
    specs = [jax.ShapeDtypeStruct(by_name[n].shape, values_lib.np_dtype(by_name[n].dtype))
             for n in unique]
    return jax.eval_shape(fn, *specs)


def _prune(made: Program) -> Program:
    """Drops the steps no output needs and the inputs no step uses."""
    needed = {o.name for o in made.outputs}
    kept = []
    for step in reversed(made.steps):
        if step.target in needed:
            kept.append(step)
            needed |= set(step.operands)
            if step.mag:
                needed |= _names_in(step.mag, made)
    made.steps = kept[::-1]
    made.inputs = {k: v for k, v in made.inputs.items() if k in needed}
    return made


def _names_in(text: str, made: Program) -> set[str]:
    return {name.removeprefix("m_")
            for name in re.findall(r"\b(?:m_)?[xv]\d+\b", text)}


def specs(made: Program, prefix: str = "", scope=None) -> list[jax.ShapeDtypeStruct]:
    """The argument specs of a program, with its symbolic dimensions."""
    shapes = made.polymorphic_shapes(prefix)
    scope = scope or jax.export.SymbolicScope()
    out = []
    for (name, value), shape in zip(made.inputs.items(), shapes):
        dims = value.shape if shape is None else jax.export.symbolic_shape(shape, scope=scope)
        out.append(jax.ShapeDtypeStruct(dims, value.dtype))
    return out


def _make_symbolic(rng, made: Program) -> None:
    tries = []
    free = set(made.inputs) - made.parameters
    # The draw happens for every dimension, free or not: the random stream stays the same.
    flags = {k: tuple(bool(d >= 1 and rng.random() < 0.5) and k in free for d in v.shape)
             for k, v in made.inputs.items()}
    tries.append(flags)
    tries.append({k: tuple(i == 0 and d >= 1 and k in free for i, d in enumerate(v.shape))
                  for k, v in made.inputs.items()})
    for flags in tries:
        if not any(any(f) for f in flags.values()):
            continue
        made.symbolic = flags
        try:  # JAX exports it with these symbolic dimensions (not only traces it)
            _export_all(made)
            return
        except Exception:  # the program needs a static size somewhere
            made.symbolic = {}
    made.symbolic = {}


def _export_all(made: Program) -> None:
    """Exports the program, and its jvp and VJP when they are checked, at its specs (as
    `paths` runs them: every input an argument, derivatives for the float ones)."""
    args = specs(made)
    fn = made.function()
    export = jax.export.export
    export(jax.jit(fn), platforms=["cpu"])(*args)
    if not made.grad:
        return
    names = list(made.inputs)
    floats = made.float_inputs()
    keep = [i for i, o in enumerate(made.outputs) if o.differentiable]

    def of_floats(flat):
        def g(*xs):
            by_name = dict(zip(names, flat), **dict(zip(floats, xs)))
            outs = fn(*[by_name[n] for n in names])
            return tuple(outs[i] for i in keep)
        return g, [a for n, a in zip(names, flat) if n in floats]

    def jvp(*flat):
        g, xs = of_floats(flat)
        return jax.jvp(g, xs, xs)[1]

    def vjp(*flat):
        g, xs = of_floats(flat)
        return jax.vjp(g, *xs)[1](g(*xs))
    export(jax.jit(jvp), platforms=["cpu"])(*args)
    export(jax.jit(vjp), platforms=["cpu"])(*args)


def _differentiable(made: Program) -> bool:
    if not made.grad or not made.float_inputs():
        return False
    if not any(o.differentiable for o in made.outputs):
        return False
    g = made.float_function()
    floats = [jax.ShapeDtypeStruct(made.inputs[k].shape, made.inputs[k].dtype)
              for k in made.float_inputs()]
    try:
        jax.eval_shape(lambda *a: jax.vjp(g, *a)[1](g(*a)), *floats)
        jax.eval_shape(lambda *a: jax.jvp(g, a, a), *floats)
    except Exception:  # an op without a derivative rule in JAX
        return False
    return True
