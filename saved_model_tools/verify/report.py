"""The records `verify` returns (`VerifyReport`, one `OutputCheck` per compared output) and the
exit codes of `jax2tf-native verify`; shared by the parent (`run`) and the child (`child`).
"""
from __future__ import annotations

import dataclasses
import json

# Exit codes of `jax2tf-native verify` (VerifyReport.exit_code).
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_UNREADABLE = 2
EXIT_NO_REFERENCES = 3
EXIT_NOT_RUNNABLE_HERE = 5  # 4 is tflite's "not converted"

SMOKE_BATCH_SIZES = (1, 2)
SERVE_TAG = "serve"


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


