"""Interleaved timing: every candidate runs once per round, so machine noise hits all alike.

The order within a round changes from round to round (`round_orders`): a candidate's first
call after another candidate's block pays for the switch (TF's thread pool woken again, its
weights back into the cache), and a fixed order charged that to the same candidate every
round. Measured (loaded SavedModels, `jax.jit`, ours, the peer's recipe; 40-60 rounds of
blocks): whichever TF model ran right after `jax.jit` was 4-11% slower than the one after it,
ours or the peer alike (MLP b1: ours 1.08x the peer when after JAX, 0.88x when the peer was;
CNN b64: 1.07x / 0.94x; CNN b1: 1.05x / 0.97x).
"""
from __future__ import annotations

import itertools
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Callable

RESULTS_DIR = Path(__file__).parent / "results"


def interleaved(candidates: dict[str, Callable[[], object]], *, rounds: int,
                calls_per_round: int = 1, warmup: int = 3, settle: int = 0) -> dict[str, dict]:
    """Times each candidate `rounds` times, round-robin; returns seconds per call statistics.

    `settle` untimed calls precede each timed block: for repeated calls of one function (a
    served model's steady state), so that the switch from the other candidates is not timed.

    Example:
        >>> stats = interleaved({"noop": lambda: None}, rounds=5)
        >>> stats["noop"]["median_s"] >= 0
        True
    """
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for order in round_orders(list(candidates), rounds):
        for name in order:
            fn = candidates[name]
            for _ in range(settle):
                fn()
            start = time.perf_counter()
            for _ in range(calls_per_round):
                fn()
            samples[name].append((time.perf_counter() - start) / calls_per_round)
    return {name: summary(values) for name, values in samples.items()}


def round_orders(names: list[str], rounds: int, seed: int = 0) -> list[list[str]]:
    """The candidates' order in each round. Up to 5 candidates (at most 5! = 120 orders):
    every permutation in turn, in a seeded order, repeating after n! rounds (over a multiple
    of n! rounds each candidate follows each other equally often; fewer rounds see only some
    orders). More candidates: a seeded shuffle per round.

    Example:
        >>> round_orders(["a", "b"], 4)
        [['a', 'b'], ['b', 'a'], ['a', 'b'], ['b', 'a']]
    """
    rng = random.Random(seed)
    if len(names) <= 5:
        permutations = [list(p) for p in itertools.permutations(names)]
        rng.shuffle(permutations)
        return [permutations[i % len(permutations)] for i in range(rounds)]
    orders = []
    for _ in range(rounds):
        order = list(names)
        rng.shuffle(order)
        orders.append(order)
    return orders


def summary(values: list[float]) -> dict:
    """Median, p10, p90 and the samples of seconds timed elsewhere (e.g. in Node).

    Example:
        >>> summary([3.0, 1.0, 2.0])["median_s"]
        2.0
    """
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"median_s": statistics.median(values), "p10_s": pick(0.1), "p90_s": pick(0.9),
            "n": len(values), "samples_s": list(values)}


def environment() -> dict:
    import jax
    import tensorflow as tf
    import os
    return {"jax": jax.__version__, "tensorflow": tf.__version__,
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "load_average": list(os.getloadavg())}


def write_results(name: str, payload: dict, markdown: str) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    (RESULTS_DIR / f"{name}.md").write_text(markdown)


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def machine_sentence(load: dict) -> str:
    """How busy the 2-core machine was, from the 1-minute load averages at start and end."""
    start, end = load["start"], load["end"]
    if max(start, end) <= 2.5:
        return (f"The machine was quiet (1-minute load average {start:.1f} at the start, "
                f"{end:.1f} at the end).")
    return (f"The machine had **2 cores shared with other work** (1-minute load average "
            f"{start:.1f} at the start, {end:.1f} at the end), so absolute numbers are noisy.")
