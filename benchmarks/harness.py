"""Interleaved timing: every candidate runs once per round, so machine noise hits all alike."""
from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

RESULTS_DIR = Path(__file__).parent / "results"


def interleaved(candidates: dict[str, Callable[[], object]], *, rounds: int,
                calls_per_round: int = 1, warmup: int = 3) -> dict[str, dict]:
    """Times each candidate `rounds` times, round-robin; returns seconds per call statistics.

    Example:
        >>> stats = interleaved({"noop": lambda: None}, rounds=5)
        >>> stats["noop"]["median_s"] >= 0
        True
    """
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(calls_per_round):
                fn()
            samples[name].append((time.perf_counter() - start) / calls_per_round)
    return {name: _summary(values) for name, values in samples.items()}


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"median_s": statistics.median(values), "p10_s": pick(0.1), "p90_s": pick(0.9),
            "n": len(values)}


def environment() -> dict:
    import jax
    import tensorflow as tf
    import os
    return {"jax": jax.__version__, "tensorflow": tf.__version__,
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count()}


def write_results(name: str, payload: dict, markdown: str) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    (RESULTS_DIR / f"{name}.md").write_text(markdown)


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"
