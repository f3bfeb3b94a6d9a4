"""A fixed-seed slice in one process, without shrinking: what CI runs
(tests/fuzz/test_fuzz_slice.py, as `python -m tools.lax_fuzz slice`)."""
from __future__ import annotations

import collections

from tools.lax_fuzz import batch, known, reproducer
from tools.lax_fuzz.check import Mismatch


def run_slice(seed: int, batches: int, pack: int) -> dict:
    """Runs `batches` batches of `pack` programs; returns the counts of what ran, the known
    classes met, and one text (with a reproducer) per unexplained mismatch."""
    settings = batch.Settings(pack=pack)
    explained = collections.Counter()
    unexplained = []
    ran = collections.Counter()
    for index in range(batches):
        drawn = batch.draw(seed, index, settings)
        outcome = batch.run(drawn)
        ran["programs"] += len(drawn.programs) - outcome.skipped
        ran["symbolic"] += sum(p.polymorphic for p in drawn.programs)
        ran["derivatives"] += sum(p.grad for p in drawn.programs)
        ran["x64"] += drawn.x64
        ran["refused"] += len(outcome.refused)
        for key, entry in outcome.stats.items():
            ran["compared " + key.split("|")[1]] += entry["results"]
        found = list(outcome.mismatches) + [
            (k, Mismatch(path, check, -1, "error", "", (), text))
            for k, path, check, text in outcome.errors]
        for k, mismatch in found:
            program = drawn.programs[k]
            name = known.classify(mismatch, program.ops)
            if name:
                explained[name] += 1
                continue
            text = (reproducer.script(program, mismatch, "CI slice")
                    if mismatch.kind != "error" else program.source())
            unexplained.append(f"seed {seed} batch {index} program {k}: {mismatch.path} "
                               f"{mismatch.check} {mismatch.kind}: {mismatch.detail}\n{text}")
    return {"ran": dict(ran), "explained": dict(explained), "unexplained": unexplained}
