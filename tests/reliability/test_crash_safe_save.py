"""Crash-safe saves: SIGKILL the saving process at 20 seeded moments of its saves.

After every kill the target path must hold nothing (when no save had completed there) or one
complete model: its graph, Variables, manifest and recorded references all of the same
version, giving JAX's outputs for that version. A version older than one already seen there
must never come back. The next save of the path cleans up what a killed writer left.

Speed: importing TF and JAX takes ~8 s, too slow to pay 20 times. One long-lived child
imports everything once (touching no TF or JAX runtime) and then, per round, forks a fresh
saving process that saves new versions in a loop until it is killed.

The kill moments do not depend on timing or machine load: the saving process kills itself
(SIGKILL) just before its k-th step, a step being a file operation under the target's
directory (Python's audit events: open, mkdir, rename, rmtree, listdir), one TF makes while
writing the SavedModel (its file_io calls), or the report of a finished phase. (The atomic
exchange, a ctypes call, raises no audit event; it is the only operation between the report
of phase 4 and the removal of the swapped-out directory, so kills land on both sides of it.) A first calibration save counts the steps of one save (N); each round's k is drawn from
the seed, spread over 1..1.5 N so that kills land in every part of a save and in the next save.
One round on the shared target kills only once a save completed there, so the rounds after it
check that a completed model survives the kills.
"""
from __future__ import annotations

import contextlib
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import tensorflow as tf

import saved_model_tools
from saved_model_tools import manifest as manifest_lib
from saved_model_tools.write import references
from saved_model_tools import verify as verify_lib

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 20
FRESH_TARGET_ROUNDS = 4   # the first rounds save to a new path: "nothing" is a valid outcome
SEED = 20240608
LINE_TIMEOUT_S = 180      # a hang guard only: no kill depends on time


def params_for(version: int) -> dict:
    w = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
    return {"w": w * (1.0 + version / 100.0), "b": np.full(3, version / 1000.0, np.float32)}


def model_fn(params, x):
    return jnp.tanh(x @ params["w"] + params["b"])


def save_version(path, version: int, progress=None):
    """The save every process makes: the version is in the output name and the parameters."""
    return saved_model_tools.save(path, model_fn, params_for(version),
                                  [np.ones((2, 4), np.float32)], polymorphic_shapes=["(b, 4)"],
                                  input_names=["x"], output_names=[f"v{version}"],
                                  overwrite=True, progress=progress)


# Python audit events that touch files. Other events, and these on paths outside the target's
# directory (imports, XLA's compiles on the reference thread), are not steps.
_FILE_EVENTS = frozenset({"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir",
                          "shutil.rmtree", "os.listdir", "os.scandir"})
# tf.saved_model.save writes its files in C++ (no audit event); these Python calls of its
# tensorflow.python.lib.io.file_io start the variables directory, saved_model.pb and the
# fingerprint, so kills also land inside TF's write.
_TF_FILE_IO = ("recursive_create_dir", "atomic_write_string_to_file")


class KillSwitch:
    """Counts the steps of the saves in this process and SIGKILLs it just before step
    `kill_at` (0: never), counting only once `after_saves` saves have completed."""

    def __init__(self, directory: Path, kill_at: int, after_saves: int, say):
        self.directory = os.fsencode(os.path.abspath(directory))
        self.kill_at, self.after_saves, self.say = kill_at, after_saves, say
        self.saves_done = self.steps = 0
        self._lock = threading.Lock()

    def install(self) -> None:
        sys.addaudithook(self._audit)  # for good: this process only saves until it dies
        from tensorflow.python.lib.io import file_io
        for name in _TF_FILE_IO:
            original = getattr(file_io, name)  # AttributeError: TF moved it; update the list

            def counted(path, *args, _original=original, _name=name, **kwargs):
                self.step(f"tf {_name}", path)
                return _original(path, *args, **kwargs)

            setattr(file_io, name, counted)

    def _audit(self, event: str, args: tuple) -> None:
        if event not in _FILE_EVENTS:
            return
        for value in args:
            if isinstance(value, (str, bytes, os.PathLike)):
                self.step(event, value)
                return

    def step(self, what: str, path=None) -> None:
        if path is not None:
            path = os.fsencode(path)
            if path != self.directory and not path.startswith(self.directory + b"/"):
                return
            what += " " + os.fsdecode(path[len(self.directory):].lstrip(b"/") or b".")
        if self.saves_done < self.after_saves:
            return
        with self._lock:
            self.steps += 1
            self.say(f"step {self.steps} {what}")
            if self.steps == self.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)


def run_saver(target: str, version: int, after_saves: int, kill_at: int, say) -> None:
    """The forked saving process: saves `version`, `version + 1`, ... to `target` until its
    KillSwitch kills it; with kill_at 0, saves once and returns (the calibration)."""
    switch = KillSwitch(Path(target).parent, kill_at, after_saves, say)
    switch.install()

    def progress(line: str) -> None:
        say(line)
        switch.step(f"reported {line.split(':')[0]}")

    while True:
        say(f"saving {version}")
        save_version(target, version, progress=progress)
        switch.saves_done += 1
        say(f"saved {version} after step {switch.steps}")
        if kill_at == 0:
            return
        version += 1


# The long-lived child: imports once, then forks one saving process per request line
# "<target> <first version> <after saves> <kill at>" and reports "pid N", the saver's lines,
# and "reaped <wait status>".
ZYGOTE = f"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
sys.path.insert(0, {str(PROJECT_ROOT)!r})
from tests.reliability import test_crash_safe_save as spec

def say(text):
    # One write(2) per line: two processes share this pipe, and writes up to PIPE_BUF bytes
    # are atomic, so lines never interleave.
    os.write(1, (text + "\\n").encode())

say("ready")
for line in sys.stdin:
    target, first, after_saves, kill_at = line.split()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            spec.run_saver(target, int(first), int(after_saves), int(kill_at), say)
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()  # into the stderr log the test names
        finally:
            sys.stderr.flush()
            os._exit(code)
    say(f"pid {{pid}}")
    say(f"reaped {{os.waitpid(pid, 0)[1]}}")
"""


class Zygote:
    """The child process, with a thread reading its stdout lines into a queue."""

    def __init__(self, log_path: Path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, bufsize=1, cwd=PROJECT_ROOT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        self.lines: queue.Queue = queue.Queue()
        self.saver_pid: int | None = None   # the saving process running now, if any
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self) -> str:
        try:
            line = self.lines.get(timeout=LINE_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no output from the saving child for {LINE_TIMEOUT_S} s; "
                                 f"see {self.log.name}") from None
        if line is None:
            raise AssertionError(f"the saving child exited ({self.proc.poll()}); its stderr "
                                 f"is in {self.log.name}")
        return line

    def request(self, target: Path, first: int, after_saves: int, kill_at: int) -> None:
        self.proc.stdin.write(f"{target} {first} {after_saves} {kill_at}\n")

    def close(self):
        if self.saver_pid is not None:
            # A failed round must not leave its saver running.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.saver_pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def model_version(path: Path) -> int | None:
    """The version of the complete model at `path` (None if nothing is there); asserts the
    graph, Variables, manifest and references are all that version and equal JAX."""
    if not path.exists():
        return None
    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    (output,) = signature.structured_outputs
    version = int(output[1:])
    params = params_for(version)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        got = signature(x=tf.constant(x))[output].numpy()
        np.testing.assert_allclose(got, model_fn(params, x), rtol=1e-5, atol=1e-6)
    record = manifest_lib.read(path)
    assert record is not None, f"{path} has a graph but no manifest"
    assert [o.name for o in record.signature("serving_default").outputs] == [output]
    for ref in record.signature("serving_default").references:
        inputs, outputs = references.read(path, ref)
        np.testing.assert_allclose(outputs[output], model_fn(params, inputs["x"]), rtol=1e-5,
                                   atol=1e-6)
    return version


def debris(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.tmp-"))


def run_round(zygote: Zygote, target: Path, first: int, after_saves: int,
              kill_at: int) -> dict:
    """One saving process to its end; what it reported: the versions it started and
    completed, its steps, and how it ended."""
    zygote.request(target, first, after_saves, kill_at)
    report = {"started": [], "saved": [], "steps": [], "status": None}
    while True:
        line = zygote.next_line()
        if line.startswith("pid "):
            zygote.saver_pid = int(line.split()[1])
        elif line.startswith("saving "):
            report["started"].append(int(line.split()[1]))
        elif line.startswith("saved "):
            report["saved"].append(int(line.split()[1]))
        elif line.startswith("step "):
            report["steps"].append(line.split(" ", 2)[2])
        elif line.startswith("reaped "):
            zygote.saver_pid = None
            report["status"] = int(line.split()[1])
            return report


def kill_points(rng: random.Random, steps_per_save: int) -> list[tuple[int, int]]:
    """(after_saves, kill_at) per round: the fresh rounds anywhere in 1..1.5 N; the shared
    rounds stratified over that range (round i in its i-th slice), so every part of a save is
    hit; the first shared round kills only after one save completed there."""
    span = steps_per_save + steps_per_save // 2
    points = [(0, rng.randint(1, span)) for _ in range(FRESH_TARGET_ROUNDS)]
    shared = ROUNDS - FRESH_TARGET_ROUNDS
    for i in range(shared):
        low = 1 + i * span // shared
        points.append((1 if i == 0 else 0, rng.randint(low, max(low, (i + 1) * span // shared))))
    return points


def test_sigkill_at_20_seeded_moments_leaves_nothing_or_a_complete_model(tmp_path):
    rng = random.Random(SEED)
    zygote = Zygote(tmp_path / "child_stderr.txt")
    verify_copy = None
    outcomes = []
    try:
        assert zygote.next_line() == "ready"
        calibration = run_round(zygote, tmp_path / "calibration" / "model", 1, 0, 0)
        assert calibration["status"] == 0 and calibration["saved"] == [1], (
            f"the calibration save failed; see {zygote.log.name}")
        steps_per_save = len(calibration["steps"])
        assert steps_per_save >= 10, calibration["steps"]  # the audit hook sees the save
        assert model_version(tmp_path / "calibration" / "model") == 1
        shared = tmp_path / "models" / "1"
        shared_version = None   # the version last seen at the shared target
        for round_index, (after_saves, kill_at) in enumerate(kill_points(rng, steps_per_save)):
            fresh = round_index < FRESH_TARGET_ROUNDS
            target = tmp_path / f"fresh_{round_index}" / "model" if fresh else shared
            report = run_round(zygote, target, 100 * (round_index + 1), after_saves, kill_at)
            status = report["status"]
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
                f"round {round_index}: the saving process ended by itself (wait status "
                f"{status}) before step {kill_at}; its stderr is in {zygote.log.name}")
            assert len(report["steps"]) == kill_at, (round_index, kill_at, report["steps"])
            left = debris(target)

            found = model_version(target)
            previous = None if fresh else shared_version
            allowed = set(report["started"]) | ({previous} if previous is not None else set())
            if previous is None:
                allowed.add(None)   # nothing had been saved there yet
            assert found in allowed, (round_index, found, allowed, report["steps"][-3:])
            if previous is not None:
                assert found is not None and found >= previous, "an older model came back"
            if report["saved"]:
                assert found is not None and found >= report["saved"][-1], (
                    "a completed save is not at the target", round_index, found, report)
            if not fresh:
                shared_version = found
            outcomes.append((round_index, after_saves, kill_at, report["steps"][-1], found,
                             len(left)))
            if left and not fresh and found is not None and verify_copy is None:
                # Keep the model as a kill mid-write left it, to verify without JAX below.
                verify_copy = tmp_path / "verify_copy"
                shutil.copytree(shared, verify_copy)
    finally:
        zygote.close()
    print(f"{steps_per_save} steps in one save: " + "; ".join(calibration["steps"]))
    print("round, saves completed first, killed before step, that step, version at target, "
          "debris dirs:")
    for outcome in outcomes:
        print("  ", outcome)

    # Some kills must have hit a save with its temporary directory open, or this proved little.
    assert sum(1 for o in outcomes if o[5]) >= 1, outcomes
    assert shared_version is not None, "no save ever completed at the shared target"
    # The next save cleans up every killed writer's temporary directory and leaves one model.
    save_version(shared, 9999)
    assert model_version(shared) == 9999
    assert debris(shared) == []
    assert sorted(os.listdir(shared.parent)) == ["1"]
    # A model a mid-write kill left behind passes the product's own check, run without JAX.
    report = verify_lib.verify(verify_copy if verify_copy is not None else shared)
    assert report.ok, report.format()
