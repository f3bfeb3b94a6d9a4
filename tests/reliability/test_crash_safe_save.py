"""Crash-safe saves: SIGKILL the saving process at 20 random moments.

After every kill the target path must hold nothing (when no save had completed there) or one
complete model: its graph, Variables, manifest and recorded references all of the same
version, giving JAX's outputs for that version. A version older than one already seen there
must never come back. The next save of the path cleans up what a killed writer left.

Speed: importing TF and JAX takes ~8 s, too slow to pay 20 times. One long-lived child
imports everything once (touching no TF or JAX runtime) and then, per round, forks a fresh
saving process that saves new versions in a loop until it is killed. The kill moment is
random (seeded): after the saving process reports the end of phase 2 of its first save (the
temporary directory is created next), the test waits on that process for a random
0-1.2 s (a bounded wait on its pidfd, not a sleep) and sends SIGKILL. That window covers the
write, the record files, the atomic swap and the start of the next save.
"""
from __future__ import annotations

import os
import queue
import random
import select
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
from saved_model_tools import references
from saved_model_tools import verify as verify_lib

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 20
FRESH_TARGET_ROUNDS = 4   # the first rounds save to a new path: "nothing" is a valid outcome
SEED = 20240608
MAX_DELAY_S = 1.2
LINE_TIMEOUT_S = 180


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


# The long-lived child: imports once, then forks one saving process per request line
# "<target> <first version>" and reports "pid N", the saver's progress, and "reaped".
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
    target, first = line.split()
    pid = os.fork()
    if pid == 0:
        version = int(first)
        try:
            while True:
                say(f"saving {{version}}")
                spec.save_version(target, version, progress=say)
                say(f"saved {{version}}")
                version += 1
        finally:
            os._exit(1)
    say(f"pid {{pid}}")
    os.waitpid(pid, 0)
    say("reaped")
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

    def close(self):
        if self.saver_pid is not None:
            kill_after(self.saver_pid, 0)   # a failed round must not leave the saver running
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def kill_after(pid: int, delay: float) -> bool:
    """Waits up to `delay` seconds for `pid` to exit, then SIGKILLs it; True if it was still
    running (the kill landed)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        exited, _, _ = select.select([fd], [], [], delay)
        if not exited:
            os.kill(pid, signal.SIGKILL)
        return not exited
    finally:
        os.close(fd)


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


def test_sigkill_at_20_random_moments_leaves_nothing_or_a_complete_model(tmp_path):
    rng = random.Random(SEED)
    zygote = Zygote(tmp_path / "child_stderr.txt")
    verify_copy = None
    outcomes = []
    try:
        assert zygote.next_line() == "ready"
        shared = tmp_path / "models" / "1"
        shared_version = None   # the version last seen at the shared target
        for round_index in range(ROUNDS):
            fresh = round_index < FRESH_TARGET_ROUNDS
            target = tmp_path / f"fresh_{round_index}" / "model" if fresh else shared
            first = 100 * (round_index + 1)
            zygote.proc.stdin.write(f"{target} {first}\n")
            pid, started, last_phase = None, [], None
            while pid is None or last_phase is None:
                line = zygote.next_line()
                if line.startswith("pid "):
                    pid = zygote.saver_pid = int(line.split()[1])
                elif line.startswith("saving "):
                    started.append(int(line.split()[1]))
                elif line.startswith("[2/5]"):
                    last_phase = line
            delay = rng.uniform(0.0, MAX_DELAY_S)
            assert kill_after(pid, delay), "the saving process ended by itself"
            lines = []
            while (line := zygote.next_line()) != "reaped":
                lines.append(line)
                if line.startswith("saving "):
                    started.append(int(line.split()[1]))
            zygote.saver_pid = None
            progress = [l for l in [last_phase] + lines if l.startswith("[")]
            left = debris(target)

            found = model_version(target)
            previous = None if fresh else shared_version
            allowed = set(started) | ({previous} if previous is not None else set())
            if previous is None:
                allowed.add(None)   # nothing had been saved there yet
            assert found in allowed, (round_index, found, allowed, progress)
            if previous is not None:
                assert found is not None and found >= previous, "an older model came back"
            if not fresh:
                shared_version = found
            outcomes.append((round_index, round(delay, 2), progress[-1].split(":")[0]
                             if progress else "-", found, len(left)))
            if left and not fresh and found is not None and verify_copy is None:
                # Keep the model as a kill mid-write left it, to verify without JAX below.
                verify_copy = tmp_path / "verify_copy"
                shutil.copytree(shared, verify_copy)
    finally:
        zygote.close()
    print("round, delay s, last phase reported, version at target, debris dirs:")
    for outcome in outcomes:
        print("  ", outcome)

    # Some kills must have hit a save with its temporary directory open, or this proved little.
    assert sum(1 for o in outcomes if o[4]) >= 1, outcomes
    assert shared_version is not None, "no save ever completed at the shared target"
    # The next save cleans up every killed writer's temporary directory and leaves one model.
    save_version(shared, 9999)
    assert model_version(shared) == 9999
    assert debris(shared) == []
    assert sorted(os.listdir(shared.parent)) == ["1"]
    # A model a mid-write kill left behind passes the product's own check, run without JAX.
    report = verify_lib.verify(verify_copy if verify_copy is not None else shared)
    assert report.ok, report.format()
