"""The benchmarks' one timing harness: interleaved rounds, first calls, statistics, the
machine's load, and writing results. Every benchmark times through it.

- `interleaved`: warm-up calls, then rounds in which every candidate runs once (or a block of
  `calls_per_round`), so machine noise hits all alike; median / p10 / p90 and the samples.
- `clocked_rounds`: the same with wall and process-CPU clocks, returning the raw samples for
  per-round (paired) ratios (`paired_ratios`).
- `first_call_seconds`: one call, compile included; `seconds_per_call`: a block of calls.
- `LoadRecord`: the 1-minute load average at the start and the end, and the minutes taken.
- `summary`, `quantile`, `environment`, `write_results`, `machine_sentence`, `rounds_main`.

Interleaved timing: every candidate runs once per round, so machine noise hits all alike.

The order within a round changes from round to round (`round_orders`): a candidate's first
call after another candidate's block pays for the switch (TF's thread pool woken again, its
weights back into the cache), and a fixed order charged that to the same candidate every
round. Measured (loaded SavedModels, `jax.jit`, ours, the peer's recipe; 40-60 rounds of
blocks): whichever TF model ran right after `jax.jit` was 4-11% slower than the one after it,
ours or the peer alike (MLP b1: ours 1.08x the peer when after JAX, 0.88x when the peer was;
CNN b64: 1.07x / 0.94x; CNN b1: 1.05x / 0.97x).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
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


def clocked_rounds(candidates: dict[str, Callable[[], object]], rounds: int, *,
                   warmup: int = 0, alternate: bool = True) -> dict[str, dict[str, list]]:
    """Times one call of each candidate per round on the wall and process-CPU clocks; returns
    the samples {"wall": {name: [seconds per round]}, "cpu": {...}}, round i of every
    candidate at index i (for `paired_ratios`).

    `warmup` untimed calls of each candidate come first. With `alternate` the order changes
    from round to round (`round_orders`), else it is the order given, every round.

    Example:
        >>> samples = clocked_rounds({"a": lambda: None, "b": lambda: None}, 3)
        >>> len(samples["wall"]["a"]), len(samples["cpu"]["b"])
        (3, 3)
    """
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    names = list(candidates)
    orders = round_orders(names, rounds) if alternate else [names] * rounds
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for order in orders:
        for name in order:
            c, w = time.process_time(), time.perf_counter()
            candidates[name]()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    return {"wall": wall, "cpu": cpu}


def paired_ratios(samples: list[float], baseline: list[float]) -> list[float]:
    """The per-round ratios samples[i] / baseline[i], sorted: a load change between rounds
    hits both sides of a round alike and cancels in its ratio.

    Example:
        >>> paired_ratios([2.0, 6.0], [1.0, 2.0])
        [2.0, 3.0]
    """
    return sorted(a / b for a, b in zip(samples, baseline) if b > 0)


def first_call_seconds(fn: Callable[[], object]) -> float:
    """Seconds of one call of `fn` until its result is ready (`jax.block_until_ready`): for a
    first call, tracing and compiling included.

    Example:
        >>> first_call_seconds(lambda: 1) >= 0
        True
    """
    import jax
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def seconds_per_call(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Mean seconds per call over `repeats` consecutive calls, after `warmup` untimed ones.

    Example:
        >>> seconds_per_call(lambda: None, 10) >= 0
        True
    """
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


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


def quantile(ordered: list[float], q: float) -> float:
    """The value at fraction `q` of sorted `ordered` (nearest rank, no interpolation).

    Example:
        >>> quantile([1.0, 2.0, 3.0, 4.0], 0.9)
        4.0
    """
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spread(values: list[float]) -> dict:
    """{"median", "p10", "p90", "n"} of `values` (unit-agnostic, as benchmarks/rows.py's).

    Example:
        >>> spread([3.0, 1.0, 2.0])
        {'median': 2.0, 'p10': 1.0, 'p90': 3.0, 'n': 3}
    """
    ordered = sorted(values)
    return {"median": statistics.median(values), "p10": quantile(ordered, 0.1),
            "p90": quantile(ordered, 0.9), "n": len(values)}


def summary(values: list[float]) -> dict:
    """Median, p10, p90 and the samples of seconds timed elsewhere (e.g. in Node).

    Example:
        >>> summary([3.0, 1.0, 2.0])["median_s"]
        2.0
    """
    stats = spread(values)
    return {"median_s": stats["median"], "p10_s": stats["p10"], "p90_s": stats["p90"],
            "n": len(values), "samples_s": list(values)}


class LoadRecord:
    """The machine's 1-minute load average when made and at `finish()`, and the minutes
    between: what a result says about how busy the shared machine was.

    Example:
        >>> load = LoadRecord()
        >>> sorted(load.finish())
        ['end', 'start']
    """

    def __init__(self):
        self.start = os.getloadavg()[0]
        self._started = time.monotonic()

    def finish(self) -> dict:
        """{"start": load average, "end": load average now}."""
        return {"start": self.start, "end": os.getloadavg()[0]}

    @property
    def minutes(self) -> float:
        return (time.monotonic() - self._started) / 60


def environment() -> dict:
    import jax
    import tensorflow as tf
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


def rounds_main(name: str, run: Callable[[int], dict], markdown: Callable[[dict], str], *,
                rounds: int, description: str | None = None) -> None:
    """The command line of a benchmark that takes only `--rounds`: runs `run(rounds)`, writes
    results/NAME.json and NAME.md (`write_results`) and prints the markdown."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args()
    result = run(args.rounds)
    text = markdown(result)
    write_results(name, result, text)
    print(text)
