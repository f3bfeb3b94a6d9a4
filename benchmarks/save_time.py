"""What `saved_model_tools.save()` pays beyond the peer's recipe, and for what (issue 15).

`save()` writes what the peer's recipe writes, plus JAX reference outputs at two batch sizes
(an XLA compile each, for `jax2tf-native verify`) and TF Serving warmup records built from
them. This measures, interleaved in one process (the order changes every round), wall and
CPU time (process time, every thread) of:

- the peer's recipe (`benchmarks.serving.save_peer_recipe`);
- `ours save()`: the defaults (references compiled on a thread while TF writes the model);
- `ours, references in series`: the same work with the references computed before the write
  (what save() did before issue 15's change), to show what the overlap gains;
- `ours, no references/warmup`: save() with the reference computation and the warmup file
  replaced by nothing (patched here, not a save() option): what the features cost.

Each save uses a fresh function (a unique constant added), so nothing is cached.
Run: `python -m benchmarks.save_time [--rounds N]`; writes results/save_time.{json,md}.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import itertools
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from benchmarks import harness, serving  # noqa: E402
from saved_model_tools import warmup  # noqa: E402
from saved_model_tools.write import references
from saved_model_tools.write import saved_model as writer

PEER = "jax2tf recipe"
OURS = "ours save()"
SERIAL = "ours, references in series"
BARE = "ours, no references/warmup"


@contextlib.contextmanager
def _in_series(compute):
    future = concurrent.futures.Future()
    future.set_result(compute())
    yield future


@contextlib.contextmanager
def _patched(label: str):
    saved = references.in_background, writer._references, warmup.write_warmup_requests
    if label == SERIAL:
        references.in_background = _in_series
    elif label == BARE:
        writer._references = lambda b, main, params: ([], lambda outputs: [])
        warmup.write_warmup_requests = lambda path, requests: None
    try:
        yield
    finally:
        references.in_background, writer._references, warmup.write_warmup_requests = saved


def measure(model: str, rounds: int, workdir: str) -> dict:
    make_params, apply_fn, make_input, poly = serving.MODELS[model]
    params, example = make_params(), make_input(2)
    counter = itertools.count()

    def save(label: str) -> None:
        offset = np.float32(next(counter))
        fn = lambda p, x: apply_fn(p, x) + offset
        path = f"{workdir}/{model}_{next(counter)}"
        if label == PEER:
            serving.save_peer_recipe(path, fn, params, example, poly)
        else:
            with _patched(label):
                serving.save_ours(path, fn, params, example, poly)
        shutil.rmtree(path)

    labels = [PEER, OURS, SERIAL, BARE]
    for label in labels:  # first-use costs of the libraries are not save time
        save(label)
    clocks = harness.clocked_rounds({label: (lambda label=label: save(label))
                                     for label in labels}, rounds)
    out = {}
    for label in labels:
        out[label] = {}
        for clock, samples in clocks.items():
            ratios = harness.paired_ratios(samples[label], samples[PEER])
            out[label][clock] = {"median_s": float(np.median(samples[label])),
                                 "paired_ratio": float(np.median(ratios)),
                                 "paired_p10": harness.quantile(ratios, 0.1),
                                 "paired_p90": harness.quantile(ratios, 0.9)}
    return out


def markdown(results: dict, rounds: int, load: tuple[float, float, float]) -> str:
    lines = ["# save() time vs the peer's recipe: what the extra features cost", "",
             f"`python -m benchmarks.save_time --rounds {rounds}`: {rounds} interleaved rounds "
             f"(order changed every round); load average at the start {load[0]:.1f}, "
             f"{load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs. Ratio: median "
             f"(p10–p90) of the per-round ratios to the peer's save in the same round. "
             f"CPU: process time of every thread.", "",
             "| model | variant | wall | wall / peer | CPU | CPU / peer |",
             "|---|---|---:|---:|---:|---:|"]
    for model, by_label in results.items():
        for label, r in by_label.items():
            w, c = r["wall"], r["cpu"]
            lines.append(f"| {model} | {label} | {w['median_s'] * 1e3:.0f} ms | "
                         f"{w['paired_ratio']:.2f} ({w['paired_p10']:.2f}–{w['paired_p90']:.2f})"
                         f" | {c['median_s'] * 1e3:.0f} ms | {c['paired_ratio']:.2f} "
                         f"({c['paired_p10']:.2f}–{c['paired_p90']:.2f}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--models", default="cnn,mlp")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    workdir = tempfile.mkdtemp(prefix="bench_save_time_")
    try:
        results = {m: measure(m, args.rounds, workdir) for m in args.models.split(",")}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = markdown(results, args.rounds, load)
    print(text)
    if not args.no_write:
        harness.write_results("save_time", {"rounds": args.rounds, "load_average": load,
                                            "environment": harness.environment(),
                                            "results": results}, text)


if __name__ == "__main__":
    main()
