"""The scale of a derivative check: the largest finite magnitude among the values a
derivative computation forms (inputs, every intermediate, outputs), or infinity where one of
its products or sums overflowed finite operands (the contract's `derivative` bound then lets
NaN, infinities and finite values stand for one another).

A tangent or gradient is a sum of products; where its terms cancel (`d(x/x)`), the result is
rounding noise around zero, and a bound relative to the result itself would call that noise a
mismatch. Each path's rounding is bounded by eps times the magnitudes it summed, which the
largest intermediate of the reference computation stands for (traced into the same `jax.jit`
as the reference, evaluated equation by equation).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core

_CALLS = ("jit", "pjit", "closed_call", "core_call")


def largest_term(fn, *args):
    """Traceable: (fn(*args), the largest finite |value| it forms, as a scalar)."""
    closed = jax.make_jaxpr(fn)(*args)
    outs, biggest = _evaluate(closed.jaxpr, closed.consts, list(args))
    return jax.tree.unflatten(jax.tree.structure(fn(*args)), outs), biggest


def _magnitude(value):
    value = jnp.asarray(value)
    if not (jnp.issubdtype(value.dtype, jnp.floating)
            or jnp.issubdtype(value.dtype, jnp.complexfloating)) or value.size == 0:
        return None
    wide = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    size = jnp.abs(value).astype(wide)
    return jnp.max(jnp.where(jnp.isfinite(size), size, 0.0))


# Primitives whose infinities from finite operands are overflows (not 1/0 or log(0)).
_ELEMENTWISE = frozenset({"mul", "add", "sub", "square", "integer_pow", "pow", "exp"})
_OVERFLOWING = _ELEMENTWISE | {"dot_general", "conv_general_dilated", "reduce_sum", "cumsum"}


def _no_infinity(values):
    """Whether no float value holds an infinity or NaN (a scalar bool array); None without
    floats."""
    flags = [jnp.all(jnp.isfinite(jnp.asarray(v))) for v in values
             if _magnitude(v) is not None]
    return jnp.all(jnp.stack(flags)) if flags else None


def _overflow(primitive, inputs, outputs):
    """jnp.inf where an equation overflowed finite operands to an infinity (x * x past the
    largest value): from there on, which terms overflow, and whether they meet as inf - inf
    (NaN) or 0 * inf, depends on the order of operations; else 0 (or None)."""
    if primitive not in _OVERFLOWING:
        return None
    if primitive in _ELEMENTWISE:
        # Element by element: an infinity elsewhere in the operands (an input's -inf) must
        # not hide an overflow here.
        ins = [jnp.asarray(v) for v in inputs if _magnitude(v) is not None]
        outs = [jnp.asarray(v) for v in outputs if _magnitude(v) is not None]
        if not ins or not outs:
            return None
        finite = functools.reduce(jnp.logical_and, [jnp.isfinite(v) for v in ins])
        return jnp.where(jnp.any(finite & jnp.isinf(outs[0])), jnp.inf, 0.0)
    before, after = _no_infinity(inputs), _no_infinity(outputs)
    if before is None or after is None:
        return None
    return jnp.where(before & ~after, jnp.inf, 0.0)


def _evaluate(jaxpr, consts, args):
    env = {}
    found = []

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    def write(v, value):
        if isinstance(v, jex_core.DropVar):
            return
        env[v] = value
        m = _magnitude(value)
        if m is not None:
            found.append(m)

    for v, c in zip(jaxpr.constvars, consts):
        write(v, c)
    for v, a in zip(jaxpr.invars, args):
        write(v, a)
    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if eqn.primitive.name in _CALLS and "jaxpr" in eqn.params:
            inner = eqn.params["jaxpr"]
            outs, biggest = _evaluate(inner.jaxpr, inner.consts, values)
            found.append(biggest)
        else:
            outs = eqn.primitive.bind(*values, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            write(v, o)
        overflow = _overflow(eqn.primitive.name, values, outs)
        if overflow is not None:
            found.append(overflow)
    wide = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    biggest = jnp.max(jnp.stack([jnp.asarray(f, wide) for f in found])) if found else \
        jnp.zeros((), wide)
    return [read(v) for v in jaxpr.outvars], biggest
