"""Runs a Python child process for a test that must not run in pytest's own process (a device
count set before JAX starts, or checks that crash TF after many compiles in one process).

The child runs from the repository root, with the repository on PYTHONPATH, unbuffered output
(a crash loses nothing already printed) and without PYTEST_ADDOPTS (the parent's pytest options
are not the child's). Its output is decoded with replacement characters, so a crash in the
middle of a write cannot turn into a UnicodeDecodeError. A child over its time bound is killed
and the test fails with what it printed until then.
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
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


@dataclasses.dataclass(frozen=True)
class Finished:
    """A child that ended by itself.

    Attributes:
      returncode: its exit status; negative: killed by that signal.
      stdout, stderr: what it wrote, decoded.
    """
    returncode: int
    stdout: str
    stderr: str

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
        return (f"--- stdout (last {stdout_chars} characters) ---\n{self.stdout[-stdout_chars:]}"
                f"\n--- stderr (last {stderr_chars} characters) ---\n"
                f"{self.stderr[-stderr_chars:]}")


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    child_env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    child_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env.update(env or {})
    return child_env


class Running:
    """A child started by `start_python`; `finish()` waits for it and returns how it ended."""

    def __init__(self, args: Sequence[str], *, timeout: float, what: str,
                 env: Mapping[str, str] | None = None, nice: int = 0):
        self.what, self.timeout = what, timeout
        # `nice` execs the interpreter: the exit status and signals are the child's own.
        command = (["nice", "-n", str(nice)] if nice else []) + [sys.executable, *args]
        self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      cwd=ROOT, env=_child_env(env))

    def finish(self) -> Finished:
        """Waits (reading its output) until the child ends, at most `timeout` seconds from now.

        Raises:
          AssertionError: the child did not end in time; it is killed, and the message holds
            its output until then.
        """
        try:
            stdout, stderr = self._proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            stdout, stderr = self._proc.communicate()
            killed = Finished(-int(signal.SIGKILL), _text(stdout), _text(stderr))
            raise AssertionError(f"{self.what} did not finish within {self.timeout:.0f} s and "
                                 f"was killed; its output until then:\n"
                                 f"{killed.output_tail()}") from None
        except BaseException:  # KeyboardInterrupt: the child must not outlive the wait
            self.kill()
            raise
        return Finished(self._proc.returncode, _text(stdout), _text(stderr))

    def renice(self, nice: int) -> None:
        """Sets the CPU priority of every thread of the child to `nice` below this process's,
        where the system allows it (Linux; raising a priority needs root), else leaves it."""
        if self._proc.returncode is not None:   # ended and reaped: its pid may be reused
            return
        priority = os.getpriority(os.PRIO_PROCESS, 0) + nice
        try:
            threads = os.listdir(f"/proc/{self._proc.pid}/task")
        except OSError:   # not Linux, or the child has ended
            return
        for thread in threads:
            with contextlib.suppress(OSError):   # ended, or not allowed
                os.setpriority(os.PRIO_PROCESS, int(thread), priority)

    def kill(self) -> None:
        """Ends the child now if it still runs (a test session that stops early)."""
        if self._proc.poll() is None:
            self._proc.kill()


def start_python(args: Sequence[str], *, timeout: float, what: str,
                 env: Mapping[str, str] | None = None, nice: int = 0) -> Running:
    """Starts `python ARGS` in a child process; see `run_python` and `Job` for the arguments."""
    return Running(args, timeout=timeout, what=what, env=env, nice=nice)


def run_python(args: Sequence[str], *, timeout: float, what: str,
               env: Mapping[str, str] | None = None) -> Finished:
    """Runs `python ARGS` in a child process and returns how it ended.

    Args:
      args: the arguments after the interpreter (`["-m", "pytest", ...]`, a script path, ...).
      timeout: seconds before the child is killed and the calling test fails.
      what: names the child in a failure message.
      env: variables set in the child on top of this process's environment.

    Raises:
      AssertionError: the child did not end within `timeout` (with its output so far).

    Example:
        >>> run_python(["-c", "print(6 * 7)"], timeout=60, what="a product").stdout
        '42\\n'
    """
    return start_python(args, timeout=timeout, what=what, env=env).finish()


@dataclasses.dataclass(frozen=True)
class Job:
    """A child for `ChildPool`: the arguments after the interpreter, as for `run_python`, its
    time bound in seconds from its start, what failure messages call it, its variables, and
    how much lower than this process its CPU priority is (`nice`: e.g. 10 for a child that
    should use only the CPU time this process leaves)."""
    args: Sequence[str]
    timeout: float
    what: str
    env: Mapping[str, str] | None = None
    nice: int = 0


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
        self._waiting = 0       # tests waiting in result(): children then get full priority
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
            child = start_python(job.args, timeout=job.timeout, what=job.what, env=job.env,
                                 nice=0 if self._waiting else job.nice)
            with self._cond:
                self._children[name] = child
                if self._closed:
                    child.kill()
            self._started[name].set()
            future.set_result(child.finish())
        except BaseException as e:  # the test that asks for this child re-raises it
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

        While a test waits here this process leaves the CPU to the children: those running
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
        """Counts a test starting (+1) or ending (-1) a wait; renices the running children to
        this process's priority while one waits, else back to their jobs' own."""
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

