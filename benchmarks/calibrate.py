"""How many consecutive calls of each candidate make one interleaved round.

Interleaving call by call biases memory-bound workloads: the TF candidates share one set of
tf.Variables, JAX has its own copy of the parameters, so each JAX call starts with its weights
evicted from the cache by the TF calls before it (MLP at batch 1: 10.5 MB of weights, 32 MB L3;
measured jax.jit 0.86 ms per call interleaved one by one, 0.47 ms in blocks of 10, 0.43 ms
alone). Blocks of calls of ~`target_s` measure each candidate in its steady state while still
interleaving at a coarser grain.
"""
from __future__ import annotations

from typing import Callable

from benchmarks import harness


def calls_per_round(candidates: dict[str, Callable[[], object]], target_s: float = 0.01,
                    max_calls: int = 50) -> int:
    """One count for all candidates: `target_s` worth of calls of the fastest, at least 1.

    Example:
        >>> calls_per_round({"noop": lambda: None}, max_calls=5)
        5
    """
    # One call each after an untimed first one (it may compile).
    fastest = min(harness.seconds_per_call(fn, repeats=1, warmup=1)
                  for fn in candidates.values())
    return max(1, min(max_calls, int(target_s / max(fastest, 1e-9))))
