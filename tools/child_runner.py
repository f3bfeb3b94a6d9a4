"""Runs Python child processes: the suite's children (checks that must not run in pytest's own
process, the long checks run beside the suite) and the docs pages (tools/doc_examples.py).

One child is a `Job`: the arguments after the interpreter, its time bound, what failure
messages call it, its variables, working directory and CPU priority. `run` runs one and
waits; `start` starts one; `ChildPool` runs named children at most `parallel` at a time.

Every child
- runs from the repository root (or the job's `cwd`), with the repository first on
  PYTHONPATH, unbuffered output (a crash loses nothing already printed), no stdin, and without
  PYTEST_ADDOPTS or PYTEST_XDIST_* (the parent's pytest options and worker are not the
  child's);
- runs in a session of its own, so that a kill ends it and whatever it started (bash, a CLI,
  a worker) together;
- has its output captured and decoded with replacement characters (a crash in the middle of
  a write cannot turn into a UnicodeDecodeError);
- past its time bound is killed, and waiting on it raises `ChildTimedOut`, an AssertionError
  naming the child and holding what it printed until then.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


@dataclasses.dataclass(frozen=True)
class Job:
    """One child.

    Attributes:
      args: the arguments after the interpreter (`["-m", "pytest", ...]`, a script path, ...).
      timeout: seconds from its start before it is killed.
      what: names the child in failure messages ("the sharded checks", "docs/compat.md").
      env: variables set in the child on top of this process's environment; a value of None
        removes that variable.
      nice: how much lower than this process its CPU priority is (e.g. 10 for a child that
        should use only the CPU time this process leaves).
      cwd: its working directory (default: the repository root).
      merge_output: stderr into stdout, in the order written (`Finished.stderr` is then "").
    """
    args: Sequence[str]
    timeout: float
    what: str
    env: Mapping[str, str | None] | None = None
    nice: int = 0
    cwd: str | os.PathLike | None = None
    merge_output: bool = False


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a child ended.

    Attributes:
      returncode: its exit status; negative: killed by that signal.
      stdout, stderr: what it wrote, decoded.
      what: the job's `what`.
      seconds: wall time from its start to its end.
    """
    returncode: int
    stdout: str
    stderr: str
    what: str = ""
    seconds: float = 0.0

    @property
    def signal_name(self) -> str:
        """", killed by SIGSEGV" when a signal ended the child, else ""."""
        if self.returncode >= 0:
            return ""
        try:
            return f", killed by {signal.Signals(-self.returncode).name}"
        except ValueError:
            return f", killed by signal {-self.returncode}"

    def output_tail(self, stdout_chars: int = 6000, stderr_chars: int = 3000) -> str:
        """The end of what the child wrote, for a failure message."""
        return (f"--- stdout (last {stdout_chars} characters) ---\n{self.stdout[-stdout_chars:]}"
                f"\n--- stderr (last {stderr_chars} characters) ---\n"
                f"{self.stderr[-stderr_chars:]}")


class ChildTimedOut(AssertionError):
    """A child ran past its time bound and was killed; `finished` holds its output until then
    (returncode -SIGKILL)."""

    def __init__(self, job: Job, finished: Finished):
        super().__init__(f"{job.what} did not finish within {job.timeout:.0f} s and was "
                         f"killed; its output until then:\n{finished.output_tail()}")
        self.finished = finished


def child_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment as a child gets it (see the module docstring), with `env`
    on top (None: removed)."""
    # Not the caller's pytest options, nor a pytest-xdist worker's identity (a child pytest
    # run is a session of its own).
    result = {k: v for k, v in os.environ.items()
              if k != "PYTEST_ADDOPTS" and not k.startswith("PYTEST_XDIST_")}
    result["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    result["PYTHONUNBUFFERED"] = "1"
    for name, value in (env or {}).items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


class Running:
    """A child started by `start`; `finish()` waits for it and returns how it ended."""

    def __init__(self, job: Job):
        self.job = job
        self._proc = subprocess.Popen(
            [sys.executable, *job.args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if job.merge_output else subprocess.PIPE,
            cwd=job.cwd or ROOT, env=child_env(job.env), start_new_session=True)
        self._start = time.monotonic()
        # Set here, before anyone can renice it (a `nice -n` wrapper would apply its nice after
        # a renice that came first), while the interpreter is starting: its later threads
        # inherit it.
        if job.nice:
            self.renice(job.nice)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def finish(self) -> Finished:
        """Waits (reading its output) until the child ends, at most `job.timeout` seconds from
        now.

        Raises:
          ChildTimedOut: the child did not end in time; it is killed, and the exception holds
            its output until then.
        """
        try:
            stdout, stderr = self._proc.communicate(timeout=self.job.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            stdout, stderr = self._proc.communicate()
            raise ChildTimedOut(self.job, self._finished(-int(signal.SIGKILL), stdout,
                                                         stderr)) from None
        except BaseException:  # KeyboardInterrupt: the child must not outlive the wait
            self.kill()
            raise
        return self._finished(self._proc.returncode, stdout, stderr)

    def _finished(self, returncode: int, stdout, stderr) -> Finished:
        return Finished(returncode, _text(stdout), _text(stderr), self.job.what,
                        time.monotonic() - self._start)

    def renice(self, nice: int) -> None:
        """Sets the CPU priority of every thread of the child to `nice` below this process's,
        where the system allows it (Linux; raising a priority needs root), else leaves it."""
        if self._proc.returncode is not None:   # ended and reaped: its pid may be reused
            return
        renice(self._proc.pid, nice)

    def kill(self) -> None:
        """Ends the child and what it started (its session) now, if it still runs."""
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)


def renice(pid: int, nice: int) -> None:
    """Sets the CPU priority of every thread of process `pid`, which leads a session of its
    own, to `nice` below this process's, where the system allows it, else leaves it."""
    priority = os.getpriority(os.PRIO_PROCESS, 0) + nice
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:   # not Linux, or the child has ended
        return
    for thread in threads:
        with contextlib.suppress(OSError):   # ended, or not allowed
            os.setpriority(os.PRIO_PROCESS, int(thread), priority)
    # The child leads a session of its own, and so (where the kernel groups by session,
    # sched_autogroup_enabled=1) a scheduling group of its own: between groups only the
    # group's nice counts, so a thread's nice alone would give it an equal share with this
    # process. Measured: three processes at 60% each on 2 cores with only thread nices.
    with contextlib.suppress(OSError):   # no autogroups, ended, or not allowed
        with open(f"/proc/{pid}/autogroup", "w") as group:
            group.write(str(max(-20, min(19, priority))))


def start(job: Job) -> Running:
    """Starts `python ARGS` for `job` in a child process."""
    return Running(job)


def run(job: Job) -> Finished:
    """Runs `python ARGS` for `job` in a child process and returns how it ended.

    Raises:
      ChildTimedOut: the child did not end within `job.timeout` (with its output so far).

    Example:
        >>> run(Job(["-c", "print(6 * 7)"], timeout=60, what="a product")).stdout
        '42\\n'
    """
    return start(job).finish()


class ChildPool:
    """Named children run at most `parallel` at a time, started in the order given, each
    waited on by a thread of its own; `result(name)` waits for that one child only.

    For independent children that leave cores idle part of the time (XLA compiles: a linalg
    check file alone keeps 1.5 of 2 cores busy on average), side by side they take less time
    than one after another, and each keeps its own process, output and time bound.

    Example:
        >>> pool = ChildPool({"a": Job(["-c", "print(1)"], 60, "child a"),
        ...                   "b": Job(["-c", "print(2)"], 60, "child b")}, parallel=2)
        >>> pool.result("b").stdout, pool.result("a").stdout
        ('2\\n', '1\\n')
        >>> pool.close()
    """

    def __init__(self, jobs: Mapping[str, Job], *, parallel: int):
        self._parallel = max(1, parallel)
        self._cond = threading.Condition()
        self._next = 0          # index in `jobs` of the next child to start
        self._running = 0
        self._closed = False
        self._jobs = dict(jobs)
        self._waiting = 0       # callers waiting in result(): children then get full priority
        self._children: dict[str, Running] = {}
        self._results = {name: concurrent.futures.Future() for name in jobs}
        self._started = {name: threading.Event() for name in jobs}
        for index, (name, job) in enumerate(jobs.items()):
            threading.Thread(target=self._run, args=(index, name, job),
                             name=f"ChildPool {name}", daemon=True).start()

    def _run(self, index: int, name: str, job: Job) -> None:
        future = self._results[name]
        with self._cond:
            self._cond.wait_for(lambda: self._closed or (
                self._next == index and self._running < self._parallel))
            self._next += 1
            self._cond.notify_all()
            if self._closed:
                future.set_exception(AssertionError(f"{job.what} was not started: its pool was "
                                                    f"closed first"))
                return
            self._running += 1
        try:
            child = start(dataclasses.replace(job, nice=0) if self._waiting else job)
            with self._cond:
                self._children[name] = child
                if self._closed:
                    child.kill()
            self._started[name].set()
            future.set_result(child.finish())
        except BaseException as e:  # the caller who asks for this child re-raises it
            future.set_exception(e)
        finally:
            with self._cond:
                self._running -= 1
                self._children.pop(name, None)
                self._cond.notify_all()

    def started(self, name: str, timeout: float) -> bool:
        """Waits at most `timeout` seconds for child `name` to start; whether it has."""
        return self._started[name].wait(timeout)

    def result(self, name: str) -> Finished:
        """Waits for child `name` and returns how it ended (raises what `finish` raised).

        While a caller waits here this process leaves the CPU to the children: those running
        get its priority (see `Job.nice`) until the wait ends."""
        if name not in self._results:
            raise AssertionError(f"no child {name!r} in this pool; it has "
                                 f"{sorted(self._results)}")
        future = self._results[name]
        if future.done():
            return future.result()
        self._set_waiting(+1)
        try:
            return future.result()
        finally:
            self._set_waiting(-1)

    def _set_waiting(self, change: int) -> None:
        """Counts a caller starting (+1) or ending (-1) a wait; renices the running children
        to this process's priority while one waits, else back to their jobs' own."""
        with self._cond:
            self._waiting += change
            for name, child in self._children.items():
                child.renice(0 if self._waiting else self._jobs[name].nice)

    def close(self) -> None:
        """Kills the children still running; those not started yet never start."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            for child in self._children.values():
                child.kill()
