"""Delta debugging of a mismatching program: fewer outputs, fewer steps, smaller and simpler
inputs, static shapes, while the mismatch (same path, check and kind) still shows."""
from __future__ import annotations

import copy
import dataclasses
import re
import time
from collections.abc import Callable

import jax
import numpy as np

from tools.lax_fuzz import generate
from tools.lax_fuzz.program import Output, Program, Step, compile_source


def shrink(program: Program, fails: Callable[[Program], bool], *, max_tries: int = 60,
           seconds: float = 90.0) -> tuple[Program, int]:
    """The smallest variant of `program` found for which `fails` holds (the program itself
    when none is), and the number of variants tried."""
    best = program
    tries = 0
    deadline = time.monotonic() + seconds
    progress = True
    while progress and tries < max_tries and time.monotonic() < deadline:
        progress = False
        for variant in _variants(best):
            if tries >= max_tries or time.monotonic() >= deadline:
                break
            if not _valid(variant):
                continue
            tries += 1
            try:
                still = fails(variant)
            except Exception:  # a variant that breaks differently is not the same mismatch
                still = False
            if still:
                best = variant
                progress = True
                break
    return best, tries


def _copy(p: Program) -> Program:
    made = copy.copy(p)
    made.inputs = dict(p.inputs)
    made.symbolic = dict(p.symbolic)
    made.steps = list(p.steps)
    made.outputs = list(p.outputs)
    return made


def _variants(p: Program):
    """Candidate simplifications, the biggest first."""
    if p.polymorphic:
        made = _copy(p)
        made.symbolic = {}
        yield made
    if len(p.outputs) > 1:
        for out in p.outputs:
            made = _copy(p)
            made.outputs = [out]
            yield generate._prune(made)
    for step in p.steps[:-1]:
        made = _copy(p)
        made.outputs = [step.as_output()]
        yield generate._prune(made)
    for i, step in enumerate(p.steps):
        for operand in dict.fromkeys(step.operands):
            bypassed = _bypass(p, i, operand)
            if bypassed is not None:
                yield bypassed
    yield from _smaller_dims(p)
    for name, value in p.inputs.items():
        yield from _simpler_values(p, name, value)


def _bypass(p: Program, i: int, operand: str) -> Program | None:
    """The program with step i's value replaced by one of its operands of the same type."""
    step = p.steps[i]
    source = _aval(p, operand)
    if source is None or source != (step.shape, step.dtype):
        return None
    made = _copy(p)
    made.steps = p.steps[:i] + [_rename(s, step.target, operand) for s in p.steps[i + 1:]]
    replacement = next((s for s in p.steps if s.target == operand), None)
    made.outputs = [
        (replacement.as_output() if replacement else Output(operand, (), None, step.dtype,
                                                            step.shape))
        if o.name == step.target else o for o in p.outputs]
    return generate._prune(made)


def _aval(p: Program, name: str):
    if name in p.inputs:
        value = p.inputs[name]
        return tuple(value.shape), np.dtype(value.dtype).name
    step = next((s for s in p.steps if s.target == name), None)
    return None if step is None else (step.shape, step.dtype)


def _rename(step: Step, old: str, new: str) -> Step:
    def swap(text):
        text = re.sub(rf"\bm_{old}\b", f"m_{new}", text)
        return re.sub(rf"\b{old}\b", new, text)
    return Step(step.target, step.template, tuple(new if o == old else o for o in step.operands),
                step.op, swap(step.mag) if step.mag else None, step.families, step.dtype,
                step.shape)


def _smaller_dims(p: Program):
    """Input dimensions cut to 1 or half, from the start or the end: one axis at a time in
    every input where it has that size (the operands of an elementwise op share their
    shapes), then every dimension of that size at once (for transposes)."""
    cuts = sorted({(axis, d) for v in p.inputs.values() for axis, d in enumerate(v.shape)
                   if d > 1}, key=lambda c: -c[1])
    plans = [(lambda axis, d, a=a, size=size: axis == a and d == size, size)
             for a, size in cuts]
    plans += [(lambda axis, d, size=size: d == size, size)
              for size in sorted({size for _, size in cuts}, reverse=True)]
    for cut, size in plans:
        for new in sorted({1, size // 2}):
            for start in (0, size - new):
                made = _copy(p)
                for name, value in p.inputs.items():
                    index = tuple(slice(start, start + new) if cut(axis, d) else slice(None)
                                  for axis, d in enumerate(value.shape))
                    made.inputs[name] = value[index]
                yield made  # step and output shapes: refreshed by `_valid`


def _simpler_values(p: Program, name: str, value: np.ndarray):
    flat = value.reshape(-1)
    if flat.size == 0:
        return
    simple = np.ones((), value.dtype) if value.dtype != np.bool_ else np.zeros((), bool)
    chunks = [(0, flat.size)]
    while chunks:
        start, stop = chunks.pop(0)
        if np.all(flat[start:stop] == simple):
            continue
        made = _copy(p)
        changed = flat.copy()
        changed[start:stop] = simple
        made.inputs[name] = changed.reshape(value.shape)
        yield made
        if stop - start > 1:
            mid = (start + stop) // 2
            chunks += [(start, mid), (mid, stop)]


def _valid(p: Program) -> bool:
    """The variant still traces (shapes that fit every op), companions and symbolic
    dimensions included; its recorded shapes are refreshed from the trace."""
    if not p.steps:
        return False
    try:
        with jax.enable_x64(p.x64):
            jax.eval_shape(p.function(), *generate.specs(p))
            concrete = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in p.inputs.values()]
            jax.eval_shape(p.function(mags=True), *concrete)
            lines = p.source().splitlines()[:-1]
            lines.append(f"    return ({', '.join(s.target for s in p.steps)},)")
            avals = jax.eval_shape(compile_source("\n".join(lines) + "\n"), *concrete)
    except Exception:
        return False
    shapes = {s.target: tuple(a.shape) for s, a in zip(p.steps, avals)}
    p.steps = [dataclasses.replace(s, shape=shapes[s.target]) for s in p.steps]
    p.outputs = [dataclasses.replace(o, shape=shapes.get(o.name, tuple(
        p.inputs[o.name].shape) if o.name in p.inputs else o.shape)) for o in p.outputs]
    fit_derivative_inputs(p)
    return True


def fit_derivative_inputs(p: Program) -> None:
    """Redraws the tangents and cotangents when a variant changed the shapes they fit."""
    if not p.jvp:
        return
    want = [p.inputs[k].shape for k in p.float_inputs()]
    outs = [o.shape for o in p.outputs if o.differentiable]
    if ([t.shape for t in p.tangents] != want or [c.shape for c in p.cts] != outs
            or [c.shape for c in p.cts2] != want):
        p.set_derivative_inputs(np.random.default_rng(0))
