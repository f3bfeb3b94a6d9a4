"""tools/child_runner.py, which runs the suite's children (the linalg checks side by side in its
ChildPool) and the docs pages: each child keeps its own output and exit status, no more than
`parallel` run at once, in the order given, a hung child is killed at its bound with what it
started, and `close` leaves none running.

The children are bare `python -c` programs (no imports), so this file takes a few seconds.
"""
import os
import select
import signal

import pytest

from tools import child_runner
from tools.child_runner import ChildPool, Job

# Appends "<event> <name>" to the file argv[1] in one write (O_APPEND: lines never interleave).
_LOG = "import os, sys; os.write(os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND), b'{} {}\\n')"
# Blocks until killed: reads a pipe nobody writes to (no sleep, no timing).
_HANG = "import os; r, w = os.pipe(); os.read(r, 1)"


def _logging_child(name: str, log) -> Job:
    code = (_LOG.format("start", name) + "; print('out ' + " + repr(name) + "); "
            + _LOG.format("end", name) + "; sys.exit(" + str(len(name)) + ")")
    return Job(["-c", code, str(log)], timeout=120, what=f"child {name}")


def test_one_at_a_time_children_run_in_order_and_never_overlap(tmp_path):
    log = tmp_path / "log"
    log.touch()
    names = ["a", "bb", "ccc", "dddd"]
    pool = ChildPool({n: _logging_child(n, log) for n in names}, parallel=1)
    try:
        results = {n: pool.result(n) for n in reversed(names)}
    finally:
        pool.close()
    assert log.read_text().split("\n")[:-1] == [f"{e} {n}" for n in names for e in ("start",
                                                                                    "end")]
    for n in names:
        assert (results[n].returncode, results[n].stdout) == (len(n), f"out {n}\n")


def test_two_at_a_time_children_all_finish_with_their_own_results(tmp_path):
    log = tmp_path / "log"
    log.touch()
    names = ["a", "bb", "ccc", "dddd", "eeeee"]
    pool = ChildPool({n: _logging_child(n, log) for n in names}, parallel=2)
    try:
        results = {n: pool.result(n) for n in names}
    finally:
        pool.close()
    events = log.read_text().split("\n")[:-1]
    running = 0
    for event in events:   # never more than two children between their start and end lines
        running += 1 if event.startswith("start") else -1
        assert 0 <= running <= 2, events
    assert sorted(e for e in events if e.startswith("start")) == [f"start {n}" for n in names]
    assert {n: (r.returncode, r.stdout) for n, r in results.items()} == {
        n: (len(n), f"out {n}\n") for n in names}


def test_a_child_past_its_bound_is_killed_and_its_test_fails_with_what_it_printed():
    pool = ChildPool({"hung": Job(["-c", "print('before the hang'); " + _HANG], timeout=0.5,
                                  what="the hung child")}, parallel=1)
    try:
        with pytest.raises(AssertionError, match=r"(?s)the hung child did not finish within "
                                                 r"0 s and was killed.*before the hang"):
            pool.result("hung")
    finally:
        pool.close()


def test_close_kills_the_running_child_and_starts_no_other():
    pool = ChildPool({"hung": Job(["-c", _HANG], timeout=600, what="the hung child"),
                      "next": Job(["-c", "print('never')"], timeout=600, what="the next child")},
                     parallel=1)
    assert pool.started("hung", timeout=60)
    pool.close()
    assert pool.result("hung").returncode == -signal.SIGKILL  # now, not after its 600 s
    with pytest.raises(AssertionError, match="the next child was not started"):
        pool.result("next")


def test_a_low_priority_child_runs_niced_and_keeps_its_own_exit_status():
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    code = "import os, sys; print(os.getpriority(os.PRIO_PROCESS, 0)); sys.exit(3)"
    # `run`, not a pool: a pool gives its children full priority while a caller waits in
    # `result`, so there the child could read either priority.
    run = child_runner.run(Job(["-c", code], timeout=120, what="the niced child", nice=5))
    assert (run.returncode, run.stdout) == (3, f"{min(parent + 5, 19)}\n"), run


def test_a_niced_child_s_scheduling_group_is_niced_too():
    """The child leads its own session, so with sched_autogroup_enabled=1 it has a scheduling
    group of its own, and only the group's nice weighs against this process."""
    try:
        enabled = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1"
    except OSError:
        enabled = False
    code = "print(open('/proc/self/autogroup').read() if %r else 'no autogroups')" % enabled
    run = child_runner.run(Job(["-c", code], timeout=120, what="the niced child", nice=5))
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    if not enabled:
        print("this kernel has no autogroups: only the threads' nice applies (checked above)")
        assert run.stdout == "no autogroups\n", run
    else:
        assert run.stdout.strip().endswith(f"nice {min(parent + 5, 19)}"), run


def test_a_pool_child_gets_full_priority_while_a_caller_waits():
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    # The child reports its priority once it differs from the one it started with (the wait
    # below renices it), or at once if the renice came before its first read.
    code = ("import os, time; p = os.getpriority(os.PRIO_PROCESS, 0); end = time.time() + 60\n"
            "while p != %d and os.getpriority(os.PRIO_PROCESS, 0) == p and time.time() < end:\n"
            "    pass\n"
            "print(os.getpriority(os.PRIO_PROCESS, 0))" % parent)
    pool = ChildPool({"niced": Job(["-c", code], timeout=120, what="the niced child", nice=5)},
                     parallel=1)
    try:
        assert pool.started("niced", timeout=60)
        run = pool.result("niced")
    finally:
        pool.close()
    assert (run.returncode, run.stdout) == (0, f"{parent}\n"), run


def test_a_timed_out_child_is_killed_with_what_it_started_and_its_output_kept(tmp_path):
    """The child starts a grandchild (as a docs page starts bash, which starts the CLI) and
    hangs; at the bound both end, and the exception holds the child's merged output."""
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', "
            f"{_HANG!r}]); open(sys.argv[1], 'w').write(str(g.pid)); "
            "print('to stdout', flush=True); print('to stderr', file=sys.stderr, flush=True); "
            + _HANG)
    job = Job(["-c", code, str(pid_file)], timeout=2, what="the parent child",
              merge_output=True)
    with pytest.raises(child_runner.ChildTimedOut, match="the parent child did not finish "
                                                         "within 2 s") as caught:
        child_runner.run(job)
    finished = caught.value.finished
    assert (finished.returncode, finished.stdout, finished.stderr) == (
        -signal.SIGKILL, "to stdout\nto stderr\n", "")
    grandchild = int(pid_file.read_text())
    # Killed with its session. A SIGKILL is delivered when the process next runs, which on a
    # busy machine can be a moment after the kill: wait (at most 10 s) for it to end; a
    # grandchild that was not killed hangs forever and fails here.
    try:
        pidfd = os.pidfd_open(grandchild)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        ended, _, _ = select.select([pidfd], [], [], 10)
    finally:
        os.close(pidfd)
    assert ended, f"the grandchild {grandchild} still runs 10 s after its session was killed"


def test_a_child_gets_its_variables_and_working_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("CHILD_RUNNER_DROPPED", "parent's")
    code = ("import os; print(os.getcwd(), os.environ.get('CHILD_RUNNER_SET'), "
            "os.environ.get('CHILD_RUNNER_DROPPED'), "
            "os.environ['PYTHONPATH'].split(os.pathsep)[0])")
    run = child_runner.run(Job(["-c", code], timeout=120, what="the env child", cwd=tmp_path,
                               env={"CHILD_RUNNER_SET": "1", "CHILD_RUNNER_DROPPED": None}))
    assert (run.returncode, run.stdout.split()) == (
        0, [str(tmp_path), "1", "None", str(child_runner.ROOT)]), run
