"""`save`'s progress lines: "[i/n] phase: seconds" as each phase finishes (`PhaseProgress`),
and for large parameters, "  ..." lines of Variables made and checkpoint bytes written.

A multi-GB write takes tens of seconds in TF's C++ checkpoint writer, which reports nothing;
the "  ..." lines come between the phase lines. Only for parameters of `LARGE_BYTES` or more,
and at most one line per `INTERVAL_S`: small models (and the tests that check the phase lines)
see the phase lines alone.
"""
from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

LARGE_BYTES = 64 * 2**20
INTERVAL_S = 2.0


def variable_bytes(variable: tf.Variable) -> int:
    return np.dtype(variable.dtype.as_numpy_dtype).itemsize * int(np.prod(variable.shape))


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


class VariableProgress:
    """`on_variable` for `tf_variables.to_variables`: "  Variables: 3/8 made (768 MiB), last
    params/2/w" lines, every INTERVAL_S once LARGE_BYTES are made, and a last one at the end.

    Example:
        >>> lines = []
        >>> report = VariableProgress(lines.append, 1)
        >>> report(tf.Variable(np.zeros(2**24, np.float32), name="params/w"))  # 64 MiB
        >>> lines
        ['  Variables: 1/1 made (64 MiB), last params/w']
    """

    def __init__(self, report: Callable[[str], None] | None, count: int):
        self._report, self._count = report, count
        self._made = self._bytes = 0
        self._last = time.perf_counter()

    def __call__(self, variable: tf.Variable) -> None:
        self._made += 1
        self._bytes += variable_bytes(variable)
        now = time.perf_counter()
        if self._report is None or self._bytes < LARGE_BYTES:
            return
        if self._made == self._count or now - self._last >= INTERVAL_S:
            self._last = now
            self._report(f"  Variables: {self._made}/{self._count} made "
                         f"({_mib(self._bytes)}), last {variable.name.removesuffix(':0')}")


@contextlib.contextmanager
def report_bytes_written(report: Callable[[str], None] | None, directory: Path,
                         variables: Sequence[tf.Variable]) -> Iterator[None]:
    """While the body writes the SavedModel into `directory`, reports every INTERVAL_S how many
    of the Variables' bytes its checkpoint data files hold ("  checkpoint: 512 of 2048 MiB
    written"), for parameters of LARGE_BYTES or more. The lines come from a thread of ours,
    which ends with the body."""
    total = sum(variable_bytes(v) for v in variables)
    if report is None or total < LARGE_BYTES:
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        written = -1
        while not stop.wait(INTERVAL_S):
            now = sum(p.stat().st_size for p in directory.rglob("*.data-*")
                      if p.is_file())  # TF writes a temporary folder, then renames
            if now != written:
                written = now
                report(f"  checkpoint: {_mib(now)} of {_mib(total)} written")

    thread = threading.Thread(target=poll, name="checkpoint_progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class PhaseProgress:
    """Reports "[i/n] phase: seconds" lines to `report` (if given) as phases finish."""

    def __init__(self, report: Callable[[str], None] | None, total: int):
        self._report, self._total, self._step = report, total, 0

    def done(self, label: str, start: float) -> None:
        self._step += 1
        if self._report:
            self._report(f"[{self._step}/{self._total}] {label}: "
                         f"{time.perf_counter() - start:.2f} s")

    @contextlib.contextmanager
    def phase(self, label: str):
        start = time.perf_counter()
        yield
        self.done(label, start)
