"""The parent of a run: hands chunks of batches to worker processes (a fresh process per
chunk, so that TF's compiled executables do not pile up), prints progress, records a batch
that crashes or hangs a worker as a finding, and writes the summary.

Resumable: every finished batch is a line in `batches-*.jsonl` under the output directory,
and a run started again with the same directory skips those batches.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tools import child_runner, lowering_version
from tools.lax_fuzz import batch, report, worker

_REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class _Running:
    proc: subprocess.Popen
    chunk: list[int]
    current: int | None = None
    started: float = 0.0
    log: object = None


def run(out_dir: Path, *, programs: int, seed: int, settings: batch.Settings, workers: int,
        chunk: int, per_class: int, shrink_seconds: float, bound: float, command: str,
        quiet: bool = False) -> dict:
    """Runs (or resumes) a fuzz run; returns the summary's numbers."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {"seed": seed, "programs": programs, "settings": dataclasses.asdict(settings),
              "command": command}
    records = worker.read_records(out_dir)
    _check_one_lowering(out_dir, records)
    config_path = out_dir / "config.json"
    if config_path.exists():
        old = json.loads(config_path.read_text())
        if (old["seed"], old["settings"]) != (seed, config["settings"]):
            raise SystemExit(f"{out_dir} holds a run with seed {old['seed']} and settings "
                             f"{old['settings']}; use another --out, or the same options")
    config_path.write_text(json.dumps(config, indent=1) + "\n")
    total = -(-programs // settings.pack)
    done = {r["batch"] for r in records}
    pending = [i for i in range(total) if i not in done]
    chunks = [pending[i:i + chunk] for i in range(0, len(pending), chunk)]
    lines: queue.Queue = queue.Queue()
    running: list[_Running] = []
    counts = {"programs": len(done) * settings.pack, "findings": 0, "unexplained": 0,
              "batches": len(done)}
    start = time.monotonic()
    start_programs = counts["programs"]
    retried: set[int] = set()
    # A terminated run still stops its workers and writes its summary (the `finally` below).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while chunks or running:
            while chunks and len(running) < workers:
                running.append(_start(chunks.pop(0), out_dir, seed, settings, per_class,
                                      shrink_seconds, lines))
            _drain(lines, running, counts, start, start_programs, total * settings.pack,
                   quiet)
            for r in list(running):
                hung = r.current is not None and time.monotonic() - r.started > bound
                if hung:
                    os.killpg(r.proc.pid, signal.SIGKILL)
                if r.proc.poll() is None:
                    continue
                _drain(lines, running, counts, start, start_programs,
                       total * settings.pack, quiet)
                running.remove(r)
                r.log.close()
                if r.proc.returncode != 0 and r.current is not None:
                    # the batch in progress crashed or hung the worker: a finding
                    _record_failure(out_dir, seed, r.current, "timeout" if hung else
                                    f"worker exit {r.proc.returncode}", r.log.name)
                    rest = r.chunk[r.chunk.index(r.current) + 1:]
                    if rest and r.current not in retried:
                        retried.add(r.current)
                        chunks.insert(0, rest)
            time.sleep(0.2)
    finally:
        for r in running:
            os.killpg(r.proc.pid, signal.SIGKILL)
        summary = report.write(out_dir)
    return summary


def _check_one_lowering(out_dir: Path, records: list[dict]) -> None:
    """A run is one lowering's: resuming with changed lowering sources would mix two."""
    other = lowering_version.foreign(records)
    if other:
        raise SystemExit(
            f"{out_dir} holds {len(other)} batches run on another lowering (commits "
            f"{lowering_version.commits_of(other)}; "
            f"this checkout is {lowering_version.commit()}, lowering "
            f"{lowering_version.fingerprint()}): a run's results stand for one lowering. Use a "
            f"fresh --out to start again, or check out the lowering the run began on to resume "
            f"it.")


def _start(chunk, out_dir, seed, settings, per_class, shrink_seconds, lines) -> _Running:
    (out_dir / "logs").mkdir(exist_ok=True)
    log = open(out_dir / "logs" / f"worker-{chunk[0]}.log", "w")
    command = [sys.executable, "-m", "tools.lax_fuzz", "worker", "--out", str(out_dir),
               "--seed", str(seed), "--batches", ",".join(map(str, chunk)),
               "--settings", json.dumps(dataclasses.asdict(settings)),
               "--per-class", str(per_class), "--shrink-seconds", str(shrink_seconds)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(_REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=_REPO, env=env,
                            text=True, start_new_session=True)
    # A session of its own is a scheduling group of its own: without this, `nice -n 5` on the
    # run would not reach its workers (tools/child_runner.py says why).
    child_runner.renice(proc.pid, 0)
    running = _Running(proc, chunk, log=log)

    def read():
        for line in proc.stdout:
            lines.put((running, line.rstrip("\n")))
    threading.Thread(target=read, daemon=True).start()
    return running


def _drain(lines, running, counts, start, start_programs, goal, quiet) -> None:
    while True:
        try:
            r, line = lines.get_nowait()
        except queue.Empty:
            return
        if line.startswith("START "):
            r.current, r.started = int(line.split()[1]), time.monotonic()
        elif line.startswith("DONE "):
            done = json.loads(line[5:])
            r.current = None
            counts["batches"] += 1
            counts["programs"] += done["programs"]
            counts["findings"] += len(done["findings"])
            counts["unexplained"] += sum(not f.get("known") for f in done["findings"])
            rate = (counts["programs"] - start_programs) / max(time.monotonic() - start, 1e-9)
            if not quiet:
                print(f"[{counts['programs']}/{goal} programs, {rate:.2f} programs/s] "
                      f"batch {done['batch']}: {len(done['findings'])} finding(s); so far "
                      f"{counts['findings']} ({counts['unexplained']} unexplained)", flush=True)
                for f in done["findings"]:
                    print(f"    {'known' if f.get('known') else 'UNEXPLAINED'}: {f['class']}"
                          f" ({f['path']} {f['check']}) {f.get('reproducer') or ''}",
                          flush=True)


def _record_failure(out_dir: Path, seed: int, index: int, what: str, log: str) -> None:
    finding = {"program": None, "path": "worker", "check": "batch", "kind": what,
               "dtype": "", "class": f"worker {what}", "known": False, "detail": f"see {log}"}
    record = {"batch": index, "seed": seed, "programs": 0, "findings": [finding],
              "refused": [], "stats": {}, "seconds": {}, "wall_seconds": 0.0,
              "cpu_seconds": 0.0, "failed": what, "time": time.time(),
              **lowering_version.stamp()}  # a crash belongs to one lowering too
    with open(out_dir / "batches-failures.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
