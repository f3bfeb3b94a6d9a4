"""The full matrix: every case of the large parametrized checks, CI's slice and the rest.

CI (`python -m pytest`) runs each linear-algebra primitive and LAPACK target in one or two
dtypes and every back-compat artifact eagerly; the other dtypes and `jit_compile` runs are
marked `full_matrix` (tests/matrix.py) and run here, each file in a fresh process, with
JAX2TF_NATIVE_FULL_MATRIX=1. The result goes to tools/results/full_matrix/ (summary.json and
summary.md) with a digest of the sources it ran on and the JAX and TF versions;
tests/tools/test_full_matrix.py fails CI when either changed and the matrix was not run
again.

Usage (about 16 minutes on 2 cores; two files at a time):
    python -m tools.full_matrix                  # run, print progress, write the result
    python -m tools.full_matrix --check          # is the committed result current? (exit 0/1)
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import pathlib
import re
import sys
import time

from tools import child_runner

REPO = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO / "tools" / "results" / "full_matrix"
ENV = "JAX2TF_NATIVE_FULL_MATRIX"
# The files the matrix runs, longest first.
FILES = ("tests/jax2tf_native/linalg_isolated/primitive_checks.py",
         "tests/jax2tf_native/linalg_isolated/lapack_rewrite_checks.py",
         "tests/jax2tf_native/linalg_isolated/symbolic_checks.py",
         "tests/jax2tf_native/linalg_isolated/nonsymmetric_checks.py",
         "tests/backcompat/test_backcompat.py")
# What the matrix's result depends on: the lowerings it checks, the checks, their data.
SOURCES = ("jax2tf_native/linalg/*.py", "jax2tf_native/linalg_portable.py",
           "jax2tf_native/lapack_rewrite/*.py", "tf_ops/custom_call_allowlist.py",
           "tests/matrix.py", "tests/backcompat/data/*", "tools/backcompat/*.py", *FILES)
_TIMEOUT_S = 3 * 3600


def sources_digest() -> str:
    """sha256 over the path and bytes of every file in `SOURCES`, in path order."""
    digest = hashlib.sha256()
    paths = sorted({p for pattern in SOURCES for p in REPO.glob(pattern) if p.is_file()})
    for path in paths:
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def pytest_summary(stdout: str) -> tuple[str, dict[str, int]]:
    """(pytest's last line, its counts): ("46 passed, 2 warnings in 81.2s", {"passed": 46,
    "warnings": 2}) from a child pytest run's output; ("", {}) for none."""
    lines = stdout.strip().splitlines()
    last = lines[-1].strip("= ") if lines else ""
    return last, {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", last.split(" in ")[0])}


def run(parallel: int) -> dict:
    """Runs every file of `FILES` with the full matrix; the summary `write` records."""
    started = time.monotonic()
    jobs = {path: child_runner.Job(
        ["-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", path], timeout=_TIMEOUT_S,
        what=f"pytest {path}", env={ENV: "1"}, cwd=str(REPO)) for path in FILES}
    pool = child_runner.ChildPool(jobs, parallel=parallel)
    files = {}
    try:
        for path in FILES:
            print(f"[full matrix] waiting for {path} ...", flush=True)
            finished = pool.result(path)
            last, outcomes = pytest_summary(finished.stdout)
            files[path] = {"outcomes": outcomes, "returncode": finished.returncode,
                           "last_line": last}
            print(f"[full matrix] {path}: {last} (exit {finished.returncode}, "
                  f"{time.monotonic() - started:.0f} s since start)", flush=True)
            if finished.returncode != 0:
                print(finished.output_tail(), flush=True)
    finally:
        pool.close()
    import jax
    import tensorflow as tf
    return {"sources_digest": sources_digest(), "files": files,
            "passed": all(f["returncode"] == 0 and f["outcomes"].get("passed", 0) > 0
                          and not set(f["outcomes"]) - {"passed", "warning", "warnings"}
                          for f in files.values()),
            "jax": jax.__version__, "tensorflow": tf.__version__,
            "date": datetime.date.today().isoformat(),
            "wall_seconds": round(time.monotonic() - started)}


def write(summary: dict, out: pathlib.Path = RESULTS) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    rows = "\n".join(f"| `{path}` | {f['last_line']} |" for path, f in summary["files"].items())
    (out / "summary.md").write_text(
        f"# The full matrix\n\n"
        f"Every case of the linear-algebra checks and the back-compat artifacts, the ones CI "
        f"deselects included (`python -m tools.full_matrix`, {summary['date']}, jax "
        f"{summary['jax']}, TensorFlow {summary['tensorflow']}, {summary['wall_seconds']} s "
        f"on 2 cores). All passed: {'yes' if summary['passed'] else 'NO'}.\n\n"
        f"| file | pytest's summary |\n|---|---|\n{rows}\n\n"
        f"Sources digest: `{summary['sources_digest']}`\n")


def check(out: pathlib.Path = RESULTS) -> list[str]:
    """Why the committed result does not hold for today's sources ([] when it does)."""
    path = out / "summary.json"
    if not path.is_file():
        return [f"{path.relative_to(REPO)} is missing: run `python -m tools.full_matrix`"]
    summary = json.loads(path.read_text())
    problems = []
    if summary["sources_digest"] != sources_digest():
        problems.append("the linear-algebra lowerings, their checks or the back-compat data "
                        "changed since the full matrix last ran: run `python -m "
                        "tools.full_matrix` and commit tools/results/full_matrix/")
    import jax
    import tensorflow as tf
    if (summary["jax"], summary["tensorflow"]) != (jax.__version__, tf.__version__):
        problems.append(f"the committed full matrix ran on jax {summary['jax']}, TensorFlow "
                        f"{summary['tensorflow']}; this is jax {jax.__version__}, TensorFlow "
                        f"{tf.__version__}: run `python -m tools.full_matrix` again")
    if not summary["passed"]:
        failing = [p for p, f in summary["files"].items() if f["returncode"] != 0]
        problems.append(f"the committed full matrix did not pass: {failing}")
    if sorted(summary["files"]) != sorted(FILES):
        problems.append(f"the committed full matrix ran {sorted(summary['files'])}, "
                        f"not {sorted(FILES)}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.full_matrix", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="only say whether the committed result is current")
    parser.add_argument("--parallel", type=int, default=2, help="files at a time (default 2)")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out)
        print("\n".join(problems) or "the committed full matrix is current")
        return 1 if problems else 0
    summary = run(args.parallel)
    write(summary, args.out)
    print(f"[full matrix] wrote {args.out}: all passed: {summary['passed']}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
