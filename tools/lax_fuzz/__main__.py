"""Command line of the differential fuzzer (docs/exactness.md#the-fuzzer).

    python -m tools.lax_fuzz run --programs 100000 --out tools/results/fuzz/long --workers 2
    python -m tools.lax_fuzz summary --out tools/results/fuzz/long
    python -m tools.lax_fuzz show --seed 0 --batch 3         # a batch's programs as source
    python -m tools.lax_fuzz slice                           # the CI slice, in this process

`run` is resumable: started again with the same --out (and options) it skips the batches
already recorded. Each mismatch is confirmed alone, shrunk and written as a runnable
reproducer under OUT/reproducers/; OUT/summary.md lists the classes, known and unexplained.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _settings(args):
    """The run's `batch.Settings` (a worker gets them as JSON)."""
    from tools.lax_fuzz import batch
    if getattr(args, "settings", None):
        return batch.Settings(**json.loads(args.settings))
    return batch.Settings(pack=args.pack)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lax_fuzz",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or resume) a fuzz run")
    run.add_argument("--programs", type=int, default=2000)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", required=True)
    run.add_argument("--workers", type=int, default=1, help="worker processes")
    run.add_argument("--pack", type=int, default=24, help="programs per packed function")
    run.add_argument("--chunk", type=int, default=20, help="batches per worker process")
    run.add_argument("--per-class", type=int, default=2, help="reproducers per class")
    run.add_argument("--shrink-seconds", type=float, default=90.0)
    run.add_argument("--bound", type=float, default=900.0, help="seconds per batch")
    run.add_argument("--quiet", action="store_true")
    summary = sub.add_parser("summary", help="rewrite OUT/summary.md from the JSON lines")
    summary.add_argument("--out", required=True)
    ci = sub.add_parser("slice", help="a fixed-seed slice in this process (what CI runs)")
    ci.add_argument("--seed", type=int, default=35)
    ci.add_argument("--batches", type=int, default=8)
    ci.add_argument("--pack", type=int, default=20)
    show = sub.add_parser("show", help="print a batch's programs")
    show.add_argument("--seed", type=int, default=0)
    show.add_argument("--batch", type=int, required=True)
    show.add_argument("--pack", type=int, default=24)
    work = sub.add_parser("worker", help=argparse.SUPPRESS)
    work.add_argument("--out", required=True)
    work.add_argument("--seed", type=int, required=True)
    work.add_argument("--batches", required=True)
    work.add_argument("--settings", required=True)
    work.add_argument("--per-class", type=int, default=2)
    work.add_argument("--shrink-seconds", type=float, default=90.0)
    args = parser.parse_args(argv)

    if args.command == "summary":
        from tools.lax_fuzz import report
        report.write(Path(args.out))
        print(Path(args.out) / "summary.md")
        return 0
    if args.command == "slice":
        from tools.lax_fuzz import ci_slice
        result = ci_slice.run_slice(args.seed, args.batches, args.pack)
        for name, count in sorted(result["explained"].items()):
            print(f"known: {name} ({count})")
        for text in result["unexplained"]:
            print("UNEXPLAINED " + text)
        print("SLICE " + json.dumps(result), flush=True)
        return 1 if result["unexplained"] else 0
    if args.command == "show":
        from tools.lax_fuzz import batch
        b = batch.draw(args.seed, args.batch, batch.Settings(pack=args.pack))
        for k, p in enumerate(b.programs):
            print(f"# program {k}: x64={b.x64} polymorphic_shapes={p.polymorphic_shapes()} "
                  f"derivatives={p.grad}")
            print(p.source(f"p{k}"))
        return 0
    if args.command == "worker":
        from tools.lax_fuzz import worker
        worker.main(args.seed, [int(i) for i in args.batches.split(",")], _settings(args),
                    Path(args.out), args.per_class, args.shrink_seconds)
        return 0
    from tools.lax_fuzz import runner
    settings = _settings(args)
    command = "python -m tools.lax_fuzz " + " ".join(shlex.quote(a) for a in (
        argv if argv is not None else sys.argv[1:]))
    agg = runner.run(Path(args.out), programs=args.programs, seed=args.seed, settings=settings,
                     workers=args.workers, chunk=args.chunk, per_class=args.per_class,
                     shrink_seconds=args.shrink_seconds, bound=args.bound, command=command,
                     quiet=args.quiet)
    unexplained = [n for n, e in agg["classes"].items() if not e["known"]]
    print(f"{agg['totals'].get('programs', 0)} programs; {len(unexplained)} unexplained "
          f"class(es); summary: {Path(args.out) / 'summary.md'}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
