"""One batch: programs drawn from a seed, packed, run on every path, compared; and one program
alone on one path and check (`check_alone`, what confirming and shrinking a mismatch run)."""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from tools.lax_fuzz import check as check_lib
from tools.lax_fuzz import generate, paths
from tools.lax_fuzz.program import Program


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run draws: programs per pack, the shares of x64, symbolic and second-order
    batches, the most steps per program, and the share of programs with derivative checks."""
    pack: int = 24
    x64_share: float = 0.35
    polymorphic_share: float = 0.25
    grad2_share: float = 0.25
    max_steps: int = 4
    derivatives: float = 0.35


@dataclasses.dataclass
class Batch:
    """A drawn batch: its programs and how it runs."""
    seed: int
    index: int
    x64: bool
    polymorphic: bool
    grad2: bool
    programs: list[Program]


def draw(seed: int, index: int, settings: Settings) -> Batch:
    rng = np.random.default_rng([seed, index])
    x64 = bool(rng.random() < settings.x64_share)
    polymorphic = bool(rng.random() < settings.polymorphic_share)
    grad2 = bool(rng.random() < settings.grad2_share)
    with jax.enable_x64(x64):
        programs = [generate.generate(rng, x64=x64, polymorphic=0.7 if polymorphic else 0.0,
                                      max_steps=settings.max_steps,
                                      derivatives=settings.derivatives)
                    for _ in range(settings.pack)]
        for p in programs:
            p.set_derivative_inputs(rng)
    return Batch(seed, index, x64, polymorphic, grad2, programs)


@dataclasses.dataclass
class Outcome:
    """What one batch gave: per program, its mismatches, refusals and errors."""
    mismatches: list = dataclasses.field(default_factory=list)  # (program index, Mismatch)
    refused: list = dataclasses.field(default_factory=list)     # (program index, path, text)
    errors: list = dataclasses.field(default_factory=list)      # (index, path, check, text)
    stats: dict = dataclasses.field(default_factory=dict)
    seconds: dict = dataclasses.field(default_factory=dict)
    skipped: int = 0  # programs JAX itself did not run


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def run(batch: Batch, checks=check_lib.CHECKS) -> Outcome:
    """Runs a batch on every path and check and compares (see `paths`)."""
    out = Outcome()
    with jax.enable_x64(batch.x64):
        _run(batch.programs, batch.grad2, checks, out)
    return out


def _run(programs: list[Program], grad2: bool, checks, out: Outcome,
         run_paths=paths.PATHS) -> None:
    index = {id(p): i for i, p in enumerate(programs)}
    clock = time.perf_counter()
    want, errs = paths.attribute(lambda pk: paths.run_forward(pk, "jit"), programs)
    ok = [p for p, e in zip(programs, errs) if e is None]
    want = [w for w, e in zip(want, errs) if e is None]
    out.skipped += len(programs) - len(ok)
    mags = [w["mags"] for w in want]
    out.seconds["jit"] = out.seconds.get("jit", 0.0) + time.perf_counter() - clock
    for path in run_paths:
        clock = time.perf_counter()
        got, errs = paths.attribute(lambda pk, path=path: paths.run_forward(pk, path), ok)
        for p, g, w, m, e in zip(ok, got, want, mags, errs):
            if e is not None:
                _failure(out, index[id(p)], path, "value", e)
                continue
            for check in ("value", "jvp"):
                if check in w and check in checks:
                    for mm in check_lib.compare_results(
                            p, path, check, g[check], w[check],
                            m if check == "value" else w["jvp_scale"], out.stats):
                        out.mismatches.append((index[id(p)], mm))
        out.seconds[path] = out.seconds.get(path, 0.0) + time.perf_counter() - clock
    refused = {i for i, _, _ in out.refused}
    orders = [o for o in (1, 2) if f"grad{o}" in checks and (o == 1 or grad2)]
    for order in orders:
        graded = [p for p in ok if p.grad and index[id(p)] not in refused]
        if not graded:
            continue
        clock = time.perf_counter()
        want_g, errs = paths.attribute(
            lambda pk, order=order: paths.run_gradients(pk, "jit", order), graded)
        graded = [p for p, e in zip(graded, errs) if e is None]
        want_g = [w for w, e in zip(want_g, errs) if e is None]
        out.seconds["jit"] += time.perf_counter() - clock
        for path in run_paths:
            clock = time.perf_counter()
            got, errs = paths.attribute(
                lambda pk, path=path, order=order: paths.run_gradients(pk, path, order), graded)
            for p, g, w, e in zip(graded, got, want_g, errs):
                if e is not None:
                    _failure(out, index[id(p)], path, f"grad{order}", e)
                    continue
                for mm in check_lib.compare_results(p, path, f"grad{order}", g, w["grads"],
                                                    w["scale"], out.stats):
                    out.mismatches.append((index[id(p)], mm))
            out.seconds[path] += time.perf_counter() - clock


def _failure(out: Outcome, i: int, path: str, check: str, exc: BaseException) -> None:
    if paths.is_refusal(exc):
        if not any(r[0] == i and r[1] == path for r in out.refused):
            out.refused.append((i, path, _short(exc)))
    else:
        out.errors.append((i, path, check, _short(exc)))


def check_alone(program: Program, path: str, check: str) -> list:
    """Runs one program on one path and check, alone; returns its mismatches, or a one-item
    list with an "error" mismatch when the path raised (a refusal is not a mismatch)."""
    out = Outcome()
    with jax.enable_x64(program.x64):
        _run([program], check == "grad2", (check,), out, run_paths=(path,))
    found = [m for _, m in out.mismatches if m.check == check and m.path == path]
    found += [check_lib.Mismatch(path, c, -1, "error", "", (), text)
              for _, p, c, text in out.errors if p == path and c == check]
    return found
