"""`verify`: run a SavedModel as a serving host would, without JAX, and compare with JAX's outputs.

The checks run in a child process in which importing `jax` or `jaxlib` raises ImportError: a
`sys.meta_path` finder is installed before anything else is imported. Blocking is the only honest
test, because TensorFlow 2.21 imports JAX itself when it is installed (through Keras and
tf.lite), so "the model ran in a process where JAX happened not to be imported" proves nothing.
The child records who tried to import JAX and reports it.

In the child, each signature is run
  (a) through `tf.saved_model.load(dir).signatures[name]` (TF2), and
  (b) through the TF1 session path TF Serving uses: `tf.compat.v1.saved_model.loader.load` with
      tag "serve", feeding and fetching the SignatureDef's tensor names;
on the reference inputs jax2tf-native recorded in `assets.extra/` (at least two batch sizes when
the batch is polymorphic), and the outputs are compared with the recorded JAX outputs with the
recorded rtol/atol. The TF Serving warmup requests, if any, are replayed through (b) too: a
warmup request TF Serving cannot run makes it refuse to load the model.

A model without jax2tf-native's manifest gets a smoke run instead: zeros at batch sizes 1 and 2
(when the input shapes leave only the batch open), checking that it runs and that (a) and (b)
agree; the report says it had no references.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from saved_model_tools.inspect import check_readable

# Exit codes of `jax2tf-native verify` (VerifyReport.exit_code).
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_UNREADABLE = 2
EXIT_NO_REFERENCES = 3
EXIT_NOT_RUNNABLE_HERE = 5  # 4 is tflite's "not converted"

SMOKE_BATCH_SIZES = (1, 2)
SERVE_TAG = "serve"

_PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Run as `python -I -c _CHILD_BOOTSTRAP PROJECT_ROOT REQUEST_FILE` (`-I`: no PYTHON* variables,
# no user site-packages, no current directory on sys.path). Nothing but `sys`, this package's
# import-free `__init__` and `verify_no_jax` is imported before the blocker is installed.
_CHILD_BOOTSTRAP = r"""
import sys
sys.path.insert(0, sys.argv[1])
from saved_model_tools import verify_no_jax
attempts = verify_no_jax.install()
from saved_model_tools import verify_child
sys.exit(verify_child.main(sys.argv[2], attempts))
"""


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """One output of one signature call, compared with its expected value.

    Attributes:
      signature: the signature key.
      path: "tf2" (tf.saved_model.load) or "tf1-session" (the TF Serving path), or "warmup"
        (a warmup request replayed through the session path: it must run, nothing to compare).
      batch_size: the batch size of the inputs (None when the signature has no batch dimension).
      output: the output key ("*" for a whole call that failed before producing outputs).
      expected: what the output was compared with: "jax reference", "tf reference" (recorded
        by TF at save time), "tf2 path" (no reference: the two load paths must agree), or
        "runs" (warmup/smoke: it must run and have the declared shape).
      passed: whether the check held.
      max_abs_error: max |got - expected| (None when not compared numerically).
      rtol, atol: the tolerance applied.
      detail: why it failed, or extra context (shape, dtype).
    """
    signature: str
    path: str
    batch_size: int | None
    output: str
    expected: str
    passed: bool
    max_abs_error: float | None = None
    rtol: float | None = None
    atol: float | None = None
    detail: str = ""

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        batch = "-" if self.batch_size is None else str(self.batch_size)
        text = (f"{status}  {self.signature:<18} batch {batch:>4}  {self.path:<11}  "
                f"{self.output:<16} vs {self.expected}")
        if self.max_abs_error is not None:
            text += f": max|diff| {self.max_abs_error:.3g} (rtol {self.rtol:g}, atol {self.atol:g})"
        if self.detail:
            text += f"  {self.detail}"
        return text


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """The result of `verify`.

    Attributes:
      path: the SavedModel directory.
      status: "passed" (every output matched its reference), "failed" (a mismatch, or a call or
        load that raised), "no-references" (no jax2tf-native manifest: a smoke run only), or
        "not-runnable-here" (the model's modules need platforms or devices this host lacks:
        it loaded through both paths and its signatures match the manifest, nothing ran).
      checks: one entry per output per signature, batch size and load path.
      had_references: whether recorded reference outputs were compared.
      has_manifest: whether the model has jax2tf-native's manifest.
      batch_sizes: the batch sizes run.
      jax_imported: whether `jax` ended up in the child's sys.modules (must be False).
      blocked_jax_imports: the import attempts the child blocked ("jax from <file>:<line>"),
        e.g. TensorFlow's own optional imports of JAX.
      tensorflow_version: the TF version that ran the model.
      errors: problems that are not per-output (load failures, unreadable references).
      seconds: wall time of the child process.
      not_runnable_here: why this host cannot run the model (one line per reason), if so.
    """
    path: str
    status: str
    checks: tuple[OutputCheck, ...]
    had_references: bool
    has_manifest: bool
    batch_sizes: tuple[int, ...]
    jax_imported: bool
    blocked_jax_imports: tuple[str, ...]
    tensorflow_version: str
    errors: tuple[str, ...] = ()
    seconds: float = 0.0
    not_runnable_here: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True only when every output matched a recorded reference."""
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return {"passed": EXIT_PASSED, "no-references": EXIT_NO_REFERENCES,
                "not-runnable-here": EXIT_NOT_RUNNABLE_HERE}.get(self.status, EXIT_FAILED)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    def format(self) -> str:
        lines = [f"verify {self.path} with TF {self.tensorflow_version}, without JAX (a child "
                 f"process in which importing jax or jaxlib fails, as on a serving host)"]
        lines.extend(c.line() for c in self.checks)
        lines.extend(f"ERROR {e}" for e in self.errors)
        if self.blocked_jax_imports:
            # TF and Keras try to import JAX when it is installed; refusing them is the point.
            lines.append(f"(JAX stayed out, as intended: {len(self.blocked_jax_imports)} optional "
                         f"import(s) of it refused, from "
                         f"{'; '.join(_short_importer(b) for b in self.blocked_jax_imports)})")
        failed = sum(not c.passed for c in self.checks)
        summary = {
            "passed": f"PASSED: {len(self.checks)} checks at batch sizes {list(self.batch_sizes)} "
                      f"through tf.saved_model.load and the TF1 session (TF Serving) path",
            "failed": f"FAILED: {failed} of {len(self.checks)} checks failed"
                      f"{f', {len(self.errors)} error(s)' if self.errors else ''}",
            "no-references": (
                (f"NO REFERENCES at batch sizes {list(self.batch_sizes)}: nothing was compared "
                 f"with JAX; both load paths ran and agreed. Fix: run without --batch-sizes to "
                 f"use the recorded batch sizes." if self.has_manifest else
                 f"NO REFERENCES: the model has no jax2tf-native manifest, so nothing was "
                 f"compared with JAX; a smoke run with zeros at batch sizes "
                 f"{list(self.batch_sizes)} passed (both load paths ran and agreed). Fix: save "
                 f"with saved_model_tools.save to record references.")),
            "not-runnable-here": (
                f"NOT RUNNABLE ON THIS HOST: {' '.join(self.not_runnable_here)} Checked instead: "
                f"the model loads through tf.saved_model.load and the TF1 session (TF Serving) "
                f"path, and its {len(self.checks)} signature inputs/outputs have the names, "
                f"dtypes and shapes the manifest records. Run verify on a host that has them to "
                f"compare outputs with JAX."),
        }[self.status]
        lines.append(f"{summary} ({self.seconds:.1f} s)")
        return "\n".join(lines) + "\n"


def _short_importer(blocked: str) -> str:
    """"jax from /venv/lib/.../site-packages/tensorflow/lite/python/util.py:53" ->
    "tensorflow/lite/python/util.py:53"."""
    _, _, where = blocked.partition(" from ")
    where = where or blocked
    return where.split("site-packages/")[-1].split("dist-packages/")[-1]


class VerifyError(RuntimeError):
    """The verification could not run at all (the child process died or timed out)."""


def verify(saved_model_dir: str | Path, *, batch_sizes: Sequence[int] | None = None,
           timeout: float = 600.0, python: str | Path | None = None) -> VerifyReport:
    """Loads and runs a SavedModel without JAX and compares it with the recorded JAX outputs.

    Args:
      saved_model_dir: the SavedModel directory.
      batch_sizes: batch sizes to run; default every recorded reference (or 1 and 2 for a smoke
        run). A size without a recorded reference runs on the reference inputs' rows repeated to
        that size and checks only that both load paths agree and the shapes are as declared.
      timeout: seconds before the child process is killed.
      python: the interpreter of the child process (default this one): e.g. that of a venv
        with an older TensorFlow, from `tf_envs.ensure_tf_env("2.19")`, to verify the model in
        the TF that will serve it.

    Returns:
      A `VerifyReport`; `report.ok` is True only when every output matched.

    Raises:
      saved_model_tools.inspect.SavedModelReadError: no such directory, no saved_model.pb, or a
        corrupt one (the message says which and how to fix it).
      ValueError: bad `batch_sizes`.
      VerifyError: the child process crashed or timed out (its last output is in the message).

    Example:
        >>> from saved_model_tools.demo_saved_model import small_saved_model
        >>> report = verify(small_saved_model())
        >>> report.status, report.ok, report.jax_imported
        ('passed', True, False)
    """
    if batch_sizes is not None:
        batch_sizes = tuple(batch_sizes)
        if not batch_sizes or any(not isinstance(b, int) or isinstance(b, bool) or b < 1
                                  for b in batch_sizes):
            raise ValueError(f"batch_sizes must be positive ints, got {batch_sizes!r}. Fix: e.g. "
                             f"batch_sizes=(1, 8).")
    directory = Path(saved_model_dir).resolve()
    # Fails here, before a child is started, for a missing directory, a corrupt graph or
    # checkpoint index, missing variables, or a manifest that does not match the graph.
    check_readable(directory)

    with tempfile.TemporaryDirectory(prefix="jax2tf_native_verify_") as work:
        request = Path(work) / "request.json"
        result = Path(work) / "result.json"
        request.write_text(json.dumps({"dir": str(directory), "batch_sizes": batch_sizes,
                                       "result": str(result)}))
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        start = time.perf_counter()
        try:
            # -I: no PYTHON* variables, no user site-packages, no current directory on sys.path.
            proc = subprocess.run(
                [str(python or sys.executable), "-I", "-c", _CHILD_BOOTSTRAP, str(_PROJECT_ROOT),
                 str(request)],
                capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise VerifyError(f"verifying {directory} took over {timeout:.0f} s; the child "
                              f"process was killed. Fix: pass a larger timeout=.") from None
        seconds = time.perf_counter() - start
        if not result.is_file():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise VerifyError(f"the verify child process exited with code {proc.returncode} "
                              f"without a result. Its last output:\n{tail}")
        raw = json.loads(result.read_text())
    return VerifyReport(
        path=str(directory), status=raw["status"],
        checks=tuple(OutputCheck(**c) for c in raw["checks"]),
        had_references=raw["had_references"], has_manifest=raw["has_manifest"],
        batch_sizes=tuple(raw["batch_sizes"]),
        jax_imported=raw["jax_imported"], blocked_jax_imports=tuple(raw["blocked_jax_imports"]),
        tensorflow_version=raw["tensorflow_version"], errors=tuple(raw["errors"]),
        seconds=seconds, not_runnable_here=tuple(raw.get("not_runnable_here", ())))
