"""Runs every benchmark in one process and writes results/latest.json, latest.md, latest.png.

Each workload times its candidates (jax.jit, the peer jax.experimental.jax2tf, ours)
interleaved round by round (`benchmarks.harness`), so load on the machine hits all alike.

Usage:
  python -m benchmarks              # full run (about 5 minutes on 2 cores; machine quiet)
  python -m benchmarks --quick      # about 2 minutes, fewer rounds: for checking, not quoting
  python -m benchmarks --long       # about 12 minutes, 3x the rounds: steadier ratios
  python -m benchmarks --only forward,gradient --out /tmp/bench
  python -m benchmarks --only conversion --write conversion_focused   # results/NAME.*, not latest.*
  python benchmarks/run.py ...      # the same
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import re
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/run.py`: make `benchmarks` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GROUPS = ("dispatch", "forward", "gradient", "conversion", "savedmodel")
# Rounds per group. Quick: enough to see the picture; full: for the committed numbers.
BUDGETS = {
    "quick": {"dispatch": 60, "forward": 10, "gradient": 6, "conversion": 2,
              "savedmodel": (2, 30)},
    "full": {"dispatch": 500, "forward": 100, "gradient": 60, "conversion": 10,
             "savedmodel": (8, 300)},
    # Three times the full run's rounds: on this 2-core machine a full run's ratios move by up
    # to ~10-20% between runs of the same code (benchmarks/README.md, Status); more rounds in
    # one run narrow that.
    "long": {"dispatch": 1500, "forward": 300, "gradient": 180, "conversion": 30,
             "savedmodel": (24, 900)},
}


def run_group(group: str, budget) -> dict:
    """Runs one workload group; returns its `rows.section`."""
    if group == "dispatch":
        from benchmarks import dispatch
        return dispatch.section(dispatch.run(budget))
    if group == "forward":
        from benchmarks import forward
        return forward.run(budget)
    if group == "gradient":
        from benchmarks import training_step
        return training_step.section(training_step.run(budget))
    if group == "conversion":
        from benchmarks import conversion
        return conversion.run(budget)
    if group == "savedmodel":
        from benchmarks import serving
        return serving.run(*budget)
    raise ValueError(f"unknown group {group!r}; expected one of {GROUPS}.")


def assemble(sections: list[dict], mode: str, duration_s: float, command: str) -> dict:
    """The results record written to latest.json."""
    from benchmarks import harness, targets
    return {"schema": 1, "mode": mode, "command": command,
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "duration_s": duration_s, "environment": harness.environment(),
            "sections": sections, "targets": targets.evaluate(sections)}


def write(result: dict, out_dir: Path, *, plot: bool = True,
          name: str = "latest") -> dict[str, Path]:
    """Writes NAME.json, NAME.md and (when matplotlib is installed) NAME.png; NAME is "latest"
    unless a focused run names its own files (`--write`)."""
    from benchmarks import report
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "md": out_dir / f"{name}.md"}
    paths["json"].write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    paths["md"].write_text(report.markdown(result))
    if plot:
        png = report.plot(result, out_dir / f"{name}.png")
        if png is not None:
            paths["png"] = png
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (~2 minutes)")
    parser.add_argument("--long", action="store_true",
                        help="three times the full run's rounds (~12 minutes)")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help=f"comma-separated groups among {','.join(GROUPS)}")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                        help="directory for latest.json / .md / .png")
    parser.add_argument("--write", metavar="NAME", default="latest",
                        help="write NAME.json / .md / .png instead of latest.* (a focused run "
                             "must not replace the committed full run)")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    groups = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {unknown}; expected some of {list(GROUPS)}.")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", args.write):
        parser.error(f"--write takes a file name stem such as conversion_focused, got "
                     f"{args.write!r}.")
    if args.quick and args.long:
        parser.error("--quick and --long exclude each other.")
    mode = "quick" if args.quick else "long" if args.long else "full"
    start = time.perf_counter()
    sections = []
    for group in groups:
        group_start = time.perf_counter()
        sections.append(run_group(group, BUDGETS[mode][group]))
        gc.collect()
        print(f"[benchmarks] {group}: {time.perf_counter() - group_start:.0f} s", flush=True)
    command = "python -m benchmarks" + " ".join(
        [""] + (["--quick"] if args.quick else []) + (["--long"] if args.long else []) +
        ([f"--only {','.join(groups)}"] if groups != list(GROUPS) else []) +
        ([f"--write {args.write}"] if args.write != "latest" else []))
    result = assemble(sections, mode, time.perf_counter() - start, command)
    paths = write(result, args.out, plot=not args.no_plot, name=args.write)
    from benchmarks import report
    print(report.targets_markdown(result["targets"]))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
