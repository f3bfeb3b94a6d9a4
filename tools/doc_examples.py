"""Runs the code blocks of Markdown pages, so the docs cannot drift from the code.

    python -m tools.doc_examples README.md docs/guides/convert.md [...] [-j 2] [--keep]

Each page runs as one generated script in a fresh Python process (so a page may set
`os.environ["XLA_FLAGS"]` in its first block, before it imports JAX), with a fresh temporary
directory as its working directory, the repository root on PYTHONPATH, the venv's bin first on
PATH (`python` and `jax2tf-native` are this venv's) and TF_CPP_MIN_LOG_LEVEL=2 unless set. The
page's fenced blocks run top to bottom in that directory, each the way a reader runs it
(tools/doc_blocks.py says how for each kind of block): Python blocks in one namespace (as in
`python -c`, a function defined on a page cannot be pickled into a multiprocessing "spawn"
child), shell blocks with bash, blocks with a file name (```js title="check.mjs") saved under
it for a later `node check.mjs`, after the page's own `npm install @tensorflow/tfjs@VERSION`.

In README.md the first two ```bash blocks are the install and test commands that `.ci/run`
runs; they are not run here.

After a page ran, the files it left in its working directory are listed (`PageResult.written`):
pages a reader follows one after another in one directory must not write the same files
(tests/docs/test_doc_examples.py checks it).

It prints per page the blocks run and the seconds each took, and the blocks not run with the
reason. On failure it prints the page, the block's line in the .md, the block and the error's
last lines. Pages run at most `-j` at a time (default 2: the suite's machine has 2 cores), each
a child of tools/child_runner.py (its own session, killed with what it started at its time
bound).
tests/docs/test_doc_examples.py runs README.md and docs/ through `run_pages`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

from tools import child_runner
from tools.doc_blocks import (  # noqa: F401 (re-exported: the tests and callers use them here)
    ALLOWED_NOT_RUN, INSTALLS_REASON, JS_TAGS, MUST_RUN_TAGS, NO_NODE_REASON, OUTPUT_TAGS,
    PYTHON_TAGS, SHELL_TAGS, Block, extract_blocks, files_never_run, step_argument)

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGE_TIMEOUT_S = 300
ERROR_TAIL_LINES = 25
# The pools of `run_pages`, so that `stop_all` can end their pages (an interrupted test run).
_POOLS: list[child_runner.ChildPool] = []

# TF's start-up lines, printed whatever TF_CPP_MIN_LOG_LEVEL says: left out of error reports.
_LOG_NOISE = re.compile(r"All log messages before absl::InitializeLog|oneDNN custom operations")


@dataclasses.dataclass
class PageResult:
    """What running one page did.

    Attributes:
      page: the page's path as given.
      blocks: every fenced block of the page, in order.
      ok: whether every block that runs ran without error.
      seconds: wall time of the page's process.
      failed_block: the block that failed (None when ok, or when the failure came before any).
      error_tail: the last lines of the page process's output when it failed.
      workdir: the page's working directory when kept (`--keep`), else None.
      started: how many of the blocks that run were started (all of them when ok).
      block_seconds: {block's line: seconds} for each block that finished; `seconds` minus
        their sum is the interpreter's start and exit.
      written: the files the page left in its working directory, relative to it, sorted
        (`node_modules` and `__pycache__` left out).
    """
    page: str
    blocks: list[Block]
    ok: bool = True
    seconds: float = 0.0
    failed_block: Block | None = None
    error_tail: str = ""
    workdir: str | None = None
    started: int = 0
    block_seconds: dict[int, float] = dataclasses.field(default_factory=dict)
    written: list[str] = dataclasses.field(default_factory=list)

    @property
    def run_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.runs]

    @property
    def not_run(self) -> list[Block]:
        return [b for b in self.blocks if not b.runs]

    @property
    def python_not_run(self) -> list[Block]:
        return [b for b in self.blocks if b.tag in PYTHON_TAGS and not b.runs]

    @property
    def must_run_not_run(self) -> list[Block]:
        """Python and JavaScript blocks not run (those needing a runtime missing here aside)."""
        return [b for b in self.blocks if b.tag in MUST_RUN_TAGS and not b.runs
                and b.reason not in ALLOWED_NOT_RUN]


def page_script(page: str | os.PathLike, blocks: list[Block], status_file: str) -> str:
    """The Python script that runs a page's blocks in order (what `run_page` runs).

    Python blocks are compiled with the page's path as file name and padded to their line in
    the .md, so a traceback points at the page's line. Progress goes to `status_file` (one
    JSON line per block started), so a crash still names its block.
    """
    md_path = str(Path(page).resolve())
    steps = []
    for index, block in enumerate(blocks):
        if not block.runs:
            continue
        argument = step_argument(block)
        steps.append(f"_doc_examples_step({index}, {block.line}, {block.kind!r}, "
                     f"{block.text!r}, {argument!r})")
    return textwrap.dedent(f'''\
        # Generated by tools/doc_examples.py from {md_path}
        import json as _doc_examples_json
        import os as _doc_examples_os
        import subprocess as _doc_examples_subprocess
        import sys as _doc_examples_sys
        import time as _doc_examples_time
        import traceback as _doc_examples_traceback

        def _doc_examples_fail():
            _doc_examples_sys.stdout.flush()
            _doc_examples_sys.stderr.flush()
            _doc_examples_os._exit(1)  # without the slow interpreter exit, as after the last block

        def _doc_examples_step(index, line, kind, text, argument=""):
            with open({status_file!r}, "a") as status:
                status.write(_doc_examples_json.dumps(
                    {{"index": index, "time": _doc_examples_time.monotonic()}}) + "\\n")
            if index is None:
                # Every block ran. Interpreter exit with TF and JAX loaded takes 3-4 s (measured
                # on the 2-core machine) and runs nothing a page needs: leave at once.
                _doc_examples_sys.stdout.flush()
                _doc_examples_sys.stderr.flush()
                _doc_examples_os._exit(0)
            _doc_examples_sys.stdout.flush()
            _doc_examples_sys.stderr.flush()
            try:
                if kind == "python":
                    code = compile("\\n" * line + text, {md_path!r}, "exec")
                    exec(code, globals())
                elif kind == "shell":
                    _doc_examples_subprocess.run(
                        ["bash", "-e", "-o", "pipefail", "-c", text], check=True)
                elif kind == "file":
                    with open(argument, "w", encoding="utf-8") as saved:
                        saved.write(text)
                elif kind == "npm_link":
                    from tools.doc_blocks import link_node_modules
                    link_node_modules(argument)
                elif kind == "pip_path":
                    from tools.doc_blocks import add_tfjs_python
                    add_tfjs_python(argument)
            except _doc_examples_subprocess.CalledProcessError as error:
                print(f"the {{kind}} block at line {{line}} exited with status "
                      f"{{error.returncode}}", file=_doc_examples_sys.stderr)
                _doc_examples_fail()
            except Exception as error:
                # The page's frames only: the generated script's own are noise to a reader.
                tb = error.__traceback__
                while tb is not None and tb.tb_frame.f_code.co_filename != {md_path!r}:
                    tb = tb.tb_next
                _doc_examples_traceback.print_exception(type(error), error, tb)
                _doc_examples_fail()
            _doc_examples_sys.stdout.flush()
            _doc_examples_sys.stderr.flush()

        # A child started with multiprocessing's spawn re-imports this file: it runs no block.
        if __name__ == "__main__":
        ''') + "".join(f"    {step}\n" for step in steps) + \
        "    _doc_examples_step(None, 0, 'end', '')\n"


def _environment() -> dict[str, str | None]:
    """What a page's process gets on top of `child_runner.child_env` (None: removed)."""
    venv_bin = str(Path(sys.executable).parent)
    return {"PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            # A page sets its own devices: the suite's or the caller's XLA_FLAGS would change
            # them.
            "XLA_FLAGS": None}


@dataclasses.dataclass
class _PreparedPage:
    """A page's generated script in its temporary folder, and the child that runs it."""
    result: PageResult
    root: str
    workdir: str
    status_file: str
    job: child_runner.Job | None   # None: the page has no block that runs


def _prepare(page: str | os.PathLike, timeout: float) -> _PreparedPage:
    blocks = extract_blocks(page)
    result = PageResult(page=_display_name(page), blocks=blocks)
    if not result.run_blocks:
        return _PreparedPage(result, "", "", "", None)
    root = tempfile.mkdtemp(prefix="doc_examples_")
    workdir = os.path.join(root, "work")
    os.mkdir(workdir)
    status_file = os.path.join(root, "status.jsonl")
    script = os.path.join(root, "page_script.py")
    Path(script).write_text(page_script(page, blocks, status_file), encoding="utf-8")
    job = child_runner.Job([script], timeout=timeout, what=result.page, env=_environment(),
                           cwd=workdir, merge_output=True)
    return _PreparedPage(result, root, workdir, status_file, job)


def _collect(prepared: _PreparedPage, finished: child_runner.Finished, timed_out: bool,
             keep: bool) -> PageResult:
    """Fills the page's result from its process's exit, output and status file."""
    result, blocks = prepared.result, prepared.result.blocks
    result.seconds = finished.seconds
    status_file = prepared.status_file
    records = [json.loads(line) for line in Path(status_file).read_text().splitlines()] \
        if os.path.exists(status_file) else []
    started = [r["index"] for r in records if r["index"] is not None]
    # Each block's time: from its start to the next block's (the last one's to the end mark).
    for record, following in zip(records, records[1:]):
        if record["index"] is not None:
            line = blocks[record["index"]].line
            result.block_seconds[line] = following["time"] - record["time"]
    result.started = len(started)
    # A block that exits the process early (sys.exit(0)) would skip the rest silently.
    skipped = [b for i, b in enumerate(blocks) if b.runs and i not in started]
    returncode = finished.returncode
    if returncode != 0 or skipped:
        result.ok = False
        output = finished.stdout.splitlines()
        tail = [line for line in output if not _LOG_NOISE.search(line)][-ERROR_TAIL_LINES:]
        result.failed_block = blocks[started[-1]] if started else None
        if returncode == 0:
            tail.append(f"the process exited (status 0) before the block at line "
                        f"{skipped[0].line} ran")
        if timed_out:
            tail.append(f"timed out after {prepared.job.timeout:.0f} s")
        elif returncode < 0:
            tail.append(f"killed by signal {-returncode}")
        result.error_tail = "\n".join(tail)
    result.written = files_left(prepared.workdir)
    if keep:
        result.workdir = prepared.workdir
    else:
        shutil.rmtree(prepared.root, ignore_errors=True)
    return result


def _finish(prepared: _PreparedPage, wait, keep: bool) -> PageResult:
    """Waits for the page's process with `wait()` (a `Finished`) and returns its result."""
    try:
        finished, timed_out = wait(), False
    except child_runner.ChildTimedOut as e:
        finished, timed_out = e.finished, True
    return _collect(prepared, finished, timed_out, keep)


def run_page(page: str | os.PathLike, timeout: float = PAGE_TIMEOUT_S,
             keep: bool = False) -> PageResult:
    """Runs one page's blocks in a fresh Python process and temporary directory.

    Example:
      >>> result = run_page("docs/compat.md")   # doctest: +SKIP
      >>> result.ok, len(result.run_blocks)     # doctest: +SKIP
    """
    prepared = _prepare(page, timeout)
    if prepared.job is None:
        return prepared.result
    return _finish(prepared, child_runner.start(prepared.job).finish, keep)


def files_left(workdir: str | os.PathLike) -> list[str]:
    """The files under `workdir`, relative to it, sorted; `node_modules` (the TF.js install
    step's) and `__pycache__` (Python's, from importing a page's module) are left out."""
    files = []
    for folder, subfolders, names in os.walk(workdir):
        subfolders[:] = sorted(d for d in subfolders if d not in ("node_modules", "__pycache__"))
        files += [os.path.relpath(os.path.join(folder, n), workdir) for n in names]
    return sorted(files)


def collisions(results: list[PageResult]) -> dict[tuple[str, str], list[str]]:
    """{(page, later page): the files both write}, for pages followed one after another in one
    working directory: a reader's second page would overwrite, or refuse to overwrite
    (FileExistsError), what the first one wrote.

    Example:
      >>> a, b = PageResult("a.md", [], written=["m/1/x"]), PageResult("b.md", [], written=["m/1/x"])
      >>> collisions([a, b])
      {('a.md', 'b.md'): ['m/1/x']}
    """
    found = {}
    for i, first in enumerate(results):
        for second in results[i + 1:]:
            shared = sorted(set(first.written) & set(second.written))
            if shared:
                found[(first.page, second.page)] = shared
    return found


def _display_name(page) -> str:
    """The page's path from the repository root when it lies inside, else as given."""
    try:
        return str(Path(page).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(page)


class PageRun:
    """One page of `run_pages`: `result()` waits for its process and returns its PageResult
    (the same one on every call)."""

    def __init__(self, prepared: _PreparedPage, pool: child_runner.ChildPool, keep: bool):
        self._prepared, self._pool, self._keep = prepared, pool, keep
        self._lock = threading.Lock()
        self._result: PageResult | None = None

    def result(self) -> PageResult:
        with self._lock:
            if self._result is None:
                prepared = self._prepared
                self._result = prepared.result if prepared.job is None else _finish(
                    prepared, lambda: self._pool.result(prepared.result.page), self._keep)
            return self._result


def stop_all() -> None:
    """Kills the pages' processes still running; those not started yet never start (they then
    report failed)."""
    for pool in _POOLS:
        pool.close()


def run_pages(pages, jobs: int = 2, timeout: float = PAGE_TIMEOUT_S,
              keep: bool = False) -> dict[str, PageRun]:
    """Starts every page (at most `jobs` at once, in the order given; tools/child_runner.py's
    ChildPool); returns {page: its PageRun}. `stop_all` ends them early.
    """
    prepared = {str(p): _prepare(p, timeout) for p in pages}
    pool = child_runner.ChildPool({p.result.page: p.job for p in prepared.values()
                                   if p.job is not None}, parallel=jobs)
    _POOLS.append(pool)
    return {page: PageRun(p, pool, keep) for page, p in prepared.items()}


def describe(result: PageResult) -> str:
    """A page's report: blocks run, blocks not run with their reasons, seconds, the failure."""
    status = "ok" if result.ok else "FAILED"
    ran = (f"{len(result.run_blocks)} blocks run" if result.ok else
           f"{result.started} of {len(result.run_blocks)} blocks started")
    lines = [f"{result.page}: {status}, {ran}, {len(result.not_run)} not run, "
             f"{result.seconds:.1f} s"]
    if result.ok and result.block_seconds:
        startup = result.seconds - sum(result.block_seconds.values())
        lines.append("  seconds per block (line: s): " + ", ".join(
            f"{line}: {t:.1f}" for line, t in result.block_seconds.items())
            + f"; process start and exit: {startup:.1f}")
    for block in result.not_run:
        if block.tag in OUTPUT_TAGS and block.tag != "console":
            continue
        lines.append(f"  not run: line {block.line} ```{block.tag}: {block.reason}")
    shown = sum(1 for b in result.not_run if b.tag in OUTPUT_TAGS and b.tag != "console")
    if shown:
        lines.append(f"  not run: {shown} output block(s) (```text / untagged)")
    if not result.ok:
        if result.failed_block is not None:
            block = result.failed_block
            lines.append(f"  failed: {result.page}:{block.line} (```{block.tag} block)")
            lines.append(textwrap.indent(block.text.rstrip("\n"), "    | "))
        else:
            lines.append(f"  failed before its first block ({result.page})")
        lines.append("  error (last lines):")
        lines.append(textwrap.indent(result.error_tail, "    "))
    if result.workdir:
        lines.append(f"  working directory kept: {result.workdir}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="+", help="Markdown files")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="pages run at once")
    parser.add_argument("--timeout", type=float, default=PAGE_TIMEOUT_S,
                        help="seconds per page")
    parser.add_argument("--keep", action="store_true",
                        help="keep each page's working directory (and its generated script)")
    args = parser.parse_args(argv)
    runs = run_pages(args.pages, args.jobs, args.timeout, args.keep)
    failed = 0
    try:
        for run in runs.values():
            result = run.result()
            failed += not result.ok
            print(describe(result), flush=True)
    except KeyboardInterrupt:
        stop_all()
        raise
    print(f"{len(runs) - failed} of {len(runs)} pages ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
