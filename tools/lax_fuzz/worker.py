"""The worker process: runs batches, confirms each mismatch alone, shrinks it, classifies it
(known, or a new class named by what is left after shrinking), writes its reproducer, and
appends one JSON line per batch to its results file."""
from __future__ import annotations

import collections
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from tools import lowering_version
from tools.lax_fuzz import batch, known, reproducer, shrink
from tools.lax_fuzz.check import Mismatch

# When this worker read the code it runs (a run's summary tells findings of code fixed since
# from those of the fixed code: known.FIXED).
_STARTED = time.time()


class Classes:
    """The classes seen so far (shared by the workers through the results files): how many
    reproducers each has, and each new class's (path, check, kind, dtype) and ops."""

    def __init__(self, records: list[dict]):
        self.reproducers = collections.Counter()
        self.new: dict[str, tuple[tuple, frozenset]] = {}
        for record in records:
            for f in record.get("findings", ()):
                self.add(f)

    def add(self, finding: dict) -> None:
        if finding.get("reproducer"):
            self.reproducers[finding["class"]] += 1
        if not finding.get("known") and finding.get("shrunk_ops") is not None \
                and finding.get("program") is not None:
            coarse = (finding["path"], finding["check"], finding["kind"], finding["dtype"])
            self.new.setdefault(finding["class"], (coarse, frozenset(finding["shrunk_ops"])))

    def match_new(self, mismatch: Mismatch, ops) -> str | None:
        """A new class seen before whose shrunk ops this program contains."""
        ops = set(ops)
        for name, (coarse, shrunk_ops) in self.new.items():
            if coarse == mismatch.coarse() and shrunk_ops <= ops:
                return name
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _mismatch_of(found: list[Mismatch], kind: str) -> Mismatch | None:
    return next((m for m in found if m.kind == kind), None)


def handle(b: batch.Batch, k: int, first: Mismatch, classes: Classes, out_dir: Path,
           per_class: int, shrink_seconds: float) -> dict:
    """Classifies one program's mismatch (path, check); shrinks and writes a reproducer
    while its class has fewer than `per_class` of them."""
    program = b.programs[k]
    finding = {"program": k, "path": first.path, "check": first.check, "kind": first.kind,
               "dtype": first.dtype, "families": list(first.families),
               "detail": first.detail[:300], "got": first.got, "want": first.want,
               "scale": first.scale,
               "ops": program.ops, "x64": b.x64,
               "polymorphic": program.polymorphic}
    name = known.classify(first, program.ops) or classes.match_new(first, program.ops)
    if name is not None and classes.reproducers[name] >= per_class:
        finding.update({"class": name, "known": name not in classes.new, "confirmed": None})
        return finding
    alone = _mismatch_of(batch.check_alone(program, first.path, first.check), first.kind)
    finding["confirmed"] = alone is not None
    if alone is None:  # only in the pack: keep it, named by the whole program
        finding.update({"class": name or "packed only: " + known.new_class(first, program.ops),
                        "known": name is not None and name not in classes.new})
        return finding

    def fails(variant) -> bool:
        return _mismatch_of(batch.check_alone(variant, first.path, first.check),
                            first.kind) is not None
    small, tries = shrink.shrink(program, fails, seconds=shrink_seconds)
    final = _mismatch_of(batch.check_alone(small, first.path, first.check), first.kind) or alone
    name = (known.classify(final, small.ops) or classes.match_new(final, small.ops)
            or known.new_class(final, small.ops))
    is_known = known.classify(final, small.ops) is not None
    path = out_dir / "reproducers" / f"{_slug(name)}-{b.index}-{k}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reproducer.script(small, final, name))
    finding.update({"class": name, "known": is_known, "shrunk_ops": small.ops,
                    "shrink_tries": tries, "detail": final.detail[:300],
                    "got": final.got, "want": final.want, "scale": final.scale,
                    "reproducer": str(path.relative_to(out_dir))})
    classes.add(finding)
    return finding


def run_batch(seed: int, index: int, settings: batch.Settings, classes: Classes,
              out_dir: Path, per_class: int, shrink_seconds: float) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    b = batch.draw(seed, index, settings)
    outcome = batch.run(b)
    first: dict[tuple, Mismatch] = {}
    for k, m in outcome.mismatches:
        first.setdefault((k, m.path, m.check), m)
    for k, path, check, text in outcome.errors:
        first.setdefault((k, path, check), Mismatch(path, check, -1, "error", "", (), text))
    findings = [handle(b, k, m, classes, out_dir, per_class, shrink_seconds)
                for (k, _, _), m in first.items()]
    return {"batch": index, "seed": seed, "x64": b.x64, "polymorphic": b.polymorphic,
            "grad2": b.grad2, "programs": len(b.programs), "skipped": outcome.skipped,
            "symbolic_programs": sum(p.polymorphic for p in b.programs),
            "derivative_programs": sum(p.grad for p in b.programs),
            "ops": dict(collections.Counter(o for p in b.programs for o in p.ops)),
            "refused": [{"program": k, "path": path, "detail": text[:300]}
                        for k, path, text in outcome.refused],
            "findings": findings, "stats": outcome.stats,
            "seconds": {k: round(v, 3) for k, v in outcome.seconds.items()},
            "wall_seconds": round(time.perf_counter() - wall, 3),
            "cpu_seconds": round(time.process_time() - cpu, 3), "time": time.time(),
            "process_started": _STARTED, **lowering_version.stamp()}


def read_records(out_dir: Path) -> list[dict]:
    records = []
    for path in sorted(out_dir.glob("batches-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a killed worker
                    continue
    return records


def main(seed: int, indices: list[int], settings: batch.Settings, out_dir: Path,
         per_class: int, shrink_seconds: float) -> None:
    """Runs the given batches; prints START/DONE lines for the parent."""
    classes = Classes(read_records(out_dir))
    results = out_dir / f"batches-{os.getpid()}.jsonl"
    for index in indices:
        print(f"START {index}", flush=True)
        record = run_batch(seed, index, settings, classes, out_dir, per_class, shrink_seconds)
        with open(results, "a") as f:
            f.write(json.dumps(record, default=_json_default) + "\n")
        print("DONE " + json.dumps({"batch": index, "programs": record["programs"],
                                    "findings": record["findings"],
                                    "cpu_seconds": record["cpu_seconds"]},
                                   default=_json_default), flush=True)
    sys.stdout.flush()


def _json_default(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return str(value)
