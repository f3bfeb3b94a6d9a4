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

# Exit codes of `jax2tf-native verify` (VerifyReport.exit_code).
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_UNREADABLE = 2
EXIT_NO_REFERENCES = 3
EXIT_NOT_RUNNABLE_HERE = 5  # 4 is tflite's "not converted"

SMOKE_BATCH_SIZES = (1, 2)
SERVE_TAG = "serve"

_PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Runs first in the child: nothing but `sys` and `traceback` is imported before the finder.
_CHILD_BOOTSTRAP = r'''
import sys, traceback

class _NoJaxFinder:
    """Makes `import jax` / `import jaxlib` raise ImportError, as on a host without JAX."""
    attempts = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in ("jax", "jaxlib"):
            return None
        frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        _NoJaxFinder.attempts.append(f"{name} from {where}")
        raise ImportError(f"import of {name!r} is blocked: jax2tf-native verify runs the model "
                          f"as on a serving host without JAX")

sys.meta_path.insert(0, _NoJaxFinder())
sys.path.insert(0, sys.argv[1])
from saved_model_tools import verify
sys.exit(verify._child_main(sys.argv[2], _NoJaxFinder.attempts))
'''


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
        blocked = "; ".join(self.blocked_jax_imports)
        lines = [f"verify {self.path} with TF {self.tensorflow_version}, in a child process "
                 f"where importing jax/jaxlib raises ImportError "
                 f"({len(self.blocked_jax_imports)} attempt(s) blocked{': ' if blocked else ''}"
                 f"{blocked})"]
        lines.extend(c.line() for c in self.checks)
        lines.extend(f"ERROR {e}" for e in self.errors)
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
        >>> report = verify("/tmp/model")
        >>> print(report.format()); report.ok
        True
    """
    from saved_model_tools.inspect import check_readable

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


# ---------------------------------------------------------------------------------------------
# The child process (no JAX importable)

@dataclasses.dataclass
class _Case:
    """One signature call to make: inputs and what to compare the outputs with."""
    signature: str
    batch_size: int | None
    inputs: dict
    expected: dict | None   # output name -> array; None: compare tf1 with tf2 only
    expected_name: str
    rtol: float
    atol: float


def _child_main(request_file: str, blocked_attempts: list) -> int:
    request = json.loads(Path(request_file).read_text())
    result: dict = {"checks": [], "errors": [], "had_references": False,
                    "has_manifest": False, "batch_sizes": [],
                    "tensorflow_version": "?", "status": "failed"}
    try:
        _run_checks(Path(request["dir"]), request["batch_sizes"], result)
    except Exception as e:  # Reported, not raised: the parent turns it into a failed report.
        result["errors"].append(f"{type(e).__name__}: {e}")
    result["jax_imported"] = "jax" in sys.modules or "jaxlib" in sys.modules
    result["blocked_jax_imports"] = list(blocked_attempts)
    if result["jax_imported"]:
        result["errors"].append("jax was imported in the child despite the block")
    failed = result["errors"] or not all(c["passed"] for c in result["checks"])
    if failed or not result["checks"]:
        result["status"] = "failed"
        if not result["checks"] and not result["errors"]:
            result["errors"].append("nothing was checked: the model has no callable signature")
    elif result.get("not_runnable_here"):
        result["status"] = "not-runnable-here"
    elif not result["had_references"]:
        result["status"] = "no-references"
    else:
        result["status"] = "passed"
    Path(request["result"]).write_text(json.dumps(result))
    return 0


def _run_checks(directory: Path, batch_sizes, result: dict) -> None:
    import tensorflow as tf

    from saved_model_tools import inspect as inspect_lib
    from saved_model_tools import manifest as manifest_lib

    result["tensorflow_version"] = tf.__version__
    proto = inspect_lib.read_saved_model_proto(directory)  # checked by the parent already
    meta_graph = inspect_lib.select_meta_graph(proto, SERVE_TAG)
    if SERVE_TAG not in meta_graph.meta_info_def.tags:
        result["errors"].append(f"the model has no {SERVE_TAG!r} tag, which TF Serving loads. "
                                f"Fix: save with tags=['serve'] (tf.saved_model.save does).")
        return
    signature_defs = {k: v for k, v in meta_graph.signature_def.items()
                      if k != "__saved_model_init_op"}
    manifest = manifest_lib.read(directory)
    result["has_manifest"] = manifest is not None
    problems = sorted({m.not_runnable_here for m in inspect_lib.inspect_saved_model(
        directory).modules if m.signatures and m.not_runnable_here})
    if problems:
        result["not_runnable_here"] = problems
        _check_without_running(directory, signature_defs, manifest, result)
        return
    cases: list[_Case] = []
    for name in sorted(signature_defs):
        recorded = None
        if manifest is not None:
            try:
                recorded = manifest.signature(name)
            except KeyError:
                result["errors"].append(f"signature {name!r} is in the graph but not in the "
                                        f"manifest; it gets a smoke run only")
        if recorded is not None and recorded.references:
            cases.extend(_reference_cases(directory, recorded, batch_sizes, result))
        else:
            cases.extend(_smoke_cases(name, signature_defs[name], batch_sizes, result))
    result["had_references"] = manifest is not None and any(
        c.expected is not None for c in cases)
    result["batch_sizes"] = sorted({c.batch_size for c in cases if c.batch_size is not None})

    # (a) TF2: tf.saved_model.load and the concrete signature functions.
    tf2_outputs: dict[int, dict] = {}
    try:
        loaded = tf.saved_model.load(str(directory), tags=[SERVE_TAG])
    except Exception as e:
        result["errors"].append(f"tf.saved_model.load failed: {type(e).__name__}: "
                                f"{_first_line(e)}")
        loaded = None
    for index, case in enumerate(cases):
        if loaded is None:
            break
        try:
            fn = loaded.signatures[case.signature]
            outputs = fn(**{k: tf.constant(v) for k, v in case.inputs.items()})
            tf2_outputs[index] = {k: v.numpy() for k, v in outputs.items()}
        except Exception as e:
            result["checks"].append(_failed_call(case, "tf2", e))
            continue
        result["checks"].extend(_compare(case, "tf2", tf2_outputs[index], case.expected,
                                         signature_defs[case.signature]))

    # Read before entering the session's graph: tf.data iterates eagerly only.
    warmup_requests = _read_warmup(directory, result)

    # (b) TF1 session path with the SignatureDef tensor names, as TF Serving runs it.
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        try:
            loaded_meta = tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG],
                                                               str(directory))
        except Exception as e:
            result["errors"].append(f"the TF1 session loader (TF Serving's path) failed: "
                                    f"{type(e).__name__}: {_first_line(e)}")
            return
        for index, case in enumerate(cases):
            sig = loaded_meta.signature_def[case.signature]
            try:
                outputs = _session_run(session, sig, case.inputs)
            except Exception as e:
                result["checks"].append(_failed_call(case, "tf1-session", e))
                continue
            expected, what = case.expected, case.expected_name
            if expected is None:  # no reference: the TF2 path's outputs are the expectation
                expected, what = tf2_outputs.get(index), "tf2 path"
            if expected is None:
                result["checks"].extend(_compare(case, "tf1-session", outputs, None, sig))
            else:
                result["checks"].extend(_compare(
                    dataclasses.replace(case, expected_name=what), "tf1-session", outputs,
                    expected, sig))
        _replay_warmup(warmup_requests, session, loaded_meta, result)


def _check_without_running(directory: Path, signature_defs: dict, manifest, result: dict) -> None:
    """For a model this host cannot run: both loaders work, and every signature's inputs and
    outputs are what the manifest records (names, dtypes, shapes; -1 where polymorphic)."""
    import tensorflow as tf

    try:
        tf.saved_model.load(str(directory), tags=[SERVE_TAG])
    except Exception as e:
        result["errors"].append(f"tf.saved_model.load failed: {type(e).__name__}: "
                                f"{_first_line(e)}")
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        try:
            tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG], str(directory))
        except Exception as e:
            result["errors"].append(f"the TF1 session loader (TF Serving's path) failed: "
                                    f"{type(e).__name__}: {_first_line(e)}")
    for name, sig in sorted(signature_defs.items()):
        recorded = None
        if manifest is not None:
            try:
                recorded = manifest.signature(name)
            except KeyError:
                pass
        for kind, graph_side, recorded_side in (
                ("in", sig.inputs, recorded.inputs if recorded else None),
                ("out", sig.outputs, recorded.outputs if recorded else None)):
            by_name = {t.name: t for t in recorded_side} if recorded_side is not None else {}
            for key, info in sorted(graph_side.items()):
                dims = (None if info.tensor_shape.unknown_rank
                        else [None if d.size < 0 else d.size for d in info.tensor_shape.dim])
                got = f"{tf.dtypes.as_dtype(info.dtype).name}{dims}"
                want = by_name.get(key)
                expected = (f"{want.dtype}{list(want.shape)}" if want is not None
                            else "a signature entry" if recorded_side is None else "absent")
                passed = (want is not None and got == expected) or (
                    recorded_side is None and dims is not None)
                result["checks"].append(dataclasses.asdict(OutputCheck(
                    name, "signature", None, f"{kind} {key}",
                    "manifest" if recorded_side is not None else "declared", passed,
                    detail=f"{got}" + ("" if passed else f", manifest records {expected}"))))
    result["had_references"] = False


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:500] if text else type(e).__name__


def _session_run(session, signature_def, inputs: dict) -> dict:
    missing = set(signature_def.inputs) - set(inputs)
    extra = set(inputs) - set(signature_def.inputs)
    if missing or extra:
        raise KeyError(f"inputs {sorted(inputs)} do not match the signature's "
                       f"{sorted(signature_def.inputs)}")
    feeds = {signature_def.inputs[k].name: v for k, v in inputs.items()}
    fetches = {k: t.name for k, t in signature_def.outputs.items()}
    return session.run(fetches, feed_dict=feeds)


def _failed_call(case: _Case, path: str, e: Exception) -> dict:
    return dataclasses.asdict(OutputCheck(
        case.signature, path, case.batch_size, "*", case.expected_name, False,
        detail=f"the call raised {type(e).__name__}: {_first_line(e)}"))


def _compare(case: _Case, path: str, got: dict, expected: dict | None, signature_def) -> list:
    import numpy as np

    checks = []
    for name in sorted(signature_def.outputs):
        check = dict(signature=case.signature, path=path, batch_size=case.batch_size,
                     output=name, expected=case.expected_name if expected is not None else "runs")
        if name not in got:
            checks.append(OutputCheck(**check, passed=False,
                                      detail=f"missing from the call's outputs {sorted(got)}"))
            continue
        value = np.asarray(got[name])
        declared = signature_def.outputs[name].tensor_shape
        if not declared.unknown_rank:
            dims = [d.size for d in declared.dim]
            if len(dims) != value.ndim or any(d >= 0 and d != s
                                              for d, s in zip(dims, value.shape)):
                checks.append(OutputCheck(**check, passed=False, detail=(
                    f"shape {list(value.shape)} does not fit the declared "
                    f"{['?' if d < 0 else d for d in dims]}")))
                continue
        if expected is None:
            checks.append(OutputCheck(**check, passed=True,
                                      detail=f"{value.dtype}{list(value.shape)}"))
            continue
        if name not in expected:
            checks.append(OutputCheck(**check, passed=False,
                                      detail="no recorded value for this output"))
            continue
        want = np.asarray(expected[name])
        if want.shape != value.shape:
            checks.append(OutputCheck(**check, passed=False, detail=(
                f"shape {list(value.shape)}, recorded {list(want.shape)}")))
            continue
        if want.dtype != value.dtype:
            checks.append(OutputCheck(**check, passed=False, detail=(
                f"dtype {value.dtype}, recorded {want.dtype}")))
            continue
        if value.dtype.kind in "OSU":
            same = bool(np.array_equal(value, want))
            checks.append(OutputCheck(**check, passed=same,
                                      detail="" if same else "string values differ"))
            continue
        got64 = value.astype(np.complex128 if value.dtype.kind == "c" else np.float64)
        want64 = want.astype(got64.dtype)
        both_nan = np.isnan(got64) & np.isnan(want64)
        diff = np.where(both_nan, 0.0, np.abs(got64 - want64))
        bound = case.atol + case.rtol * np.abs(want64)
        passed = bool(np.all((diff <= bound) | both_nan))
        max_err = float(np.nanmax(diff)) if diff.size else 0.0
        detail = ""
        if not passed:
            worst = np.unravel_index(int(np.nanargmax(diff - bound)), diff.shape)
            detail = (f"worst at {tuple(int(i) for i in worst)}: got {got64[worst]:.6g}, "
                      f"expected {want64[worst]:.6g}")
        checks.append(OutputCheck(**check, passed=passed, max_abs_error=max_err,
                                  rtol=case.rtol, atol=case.atol, detail=detail))
    return [dataclasses.asdict(c) for c in checks]


def _reference_cases(directory: Path, recorded, batch_sizes, result: dict) -> list[_Case]:
    import numpy as np

    from saved_model_tools import manifest as manifest_lib
    from saved_model_tools import reference_file

    loaded = []
    for ref in recorded.references:
        try:
            path = manifest_lib.reference_path(directory, ref.file)
        except manifest_lib.ManifestError as e:
            result["errors"].append(f"signature {recorded.name!r}: {e}")
            continue
        if not path.is_file():
            result["errors"].append(
                f"signature {recorded.name!r}: reference file {path} is missing. Fix: re-save "
                f"the model (the manifest and its .npz files are written together).")
            continue
        try:
            data = reference_file.read(path)
        except manifest_lib.ManifestError as e:
            result["errors"].append(f"signature {recorded.name!r}: {e}")
            continue
        inputs = {t.name: data[f"inputs/{t.name}"] for t in recorded.inputs
                  if f"inputs/{t.name}" in data}
        outputs = {t.name: data[f"outputs/{t.name}"] for t in recorded.outputs
                   if f"outputs/{t.name}" in data}
        if len(inputs) != len(recorded.inputs):
            result["errors"].append(
                f"signature {recorded.name!r}: {path.name} lacks inputs "
                f"{sorted({t.name for t in recorded.inputs} - set(inputs))}. Fix: re-save.")
            continue
        loaded.append((ref, inputs, outputs))
    cases = []
    wanted = None if batch_sizes is None else list(batch_sizes)
    by_batch = {ref.batch_size: (ref, inputs, outputs) for ref, inputs, outputs in loaded}
    for size in (sorted(by_batch) if wanted is None else wanted):
        if size in by_batch:
            ref, inputs, outputs = by_batch[size]
            cases.append(_Case(recorded.name, size, inputs, outputs,
                               f"{recorded.reference_source} reference", ref.rtol, ref.atol))
        elif loaded:
            # Unrecorded batch: the recorded rows repeated to `size`; only the TF paths agree.
            ref, inputs, _ = max(loaded, key=lambda item: item[0].batch_size)
            batched = [t.name for t in recorded.inputs if t.shape and t.shape[0] is None]
            if not batched:
                result["errors"].append(
                    f"signature {recorded.name!r} has no polymorphic batch dimension, so batch "
                    f"size {size} cannot be fed. Fix: use the recorded batch sizes "
                    f"{sorted(by_batch)}.")
                continue
            rows = np.arange(size) % ref.batch_size
            derived = {k: (v[rows] if k in batched else v) for k, v in inputs.items()}
            cases.append(_Case(recorded.name, size, derived, None, "tf2 path", ref.rtol,
                               ref.atol))
    return cases


def _smoke_cases(name: str, signature_def, batch_sizes, result: dict) -> list[_Case]:
    import numpy as np
    import tensorflow as tf

    shapes = {}
    for key, info in signature_def.inputs.items():
        if info.tensor_shape.unknown_rank:
            result["errors"].append(f"signature {name!r} input {key!r} has unknown rank: no "
                                    f"zeros input can be built for a smoke run")
            return []
        dims = [d.size for d in info.tensor_shape.dim]
        if any(d < 0 for d in dims[1:]):
            result["errors"].append(
                f"signature {name!r} input {key!r} has open non-batch dimensions {dims}: no "
                f"zeros input can be built for a smoke run. Fix: save with "
                f"saved_model_tools.save to record reference inputs.")
            return []
        shapes[key] = (dims, tf.dtypes.as_dtype(info.dtype).as_numpy_dtype)
    has_batch = any(dims and dims[0] < 0 for dims, _ in shapes.values())
    sizes = tuple(batch_sizes or SMOKE_BATCH_SIZES) if has_batch else (None,)
    cases = []
    for size in sizes:
        inputs = {}
        for key, (dims, dtype) in shapes.items():
            shape = [size if (i == 0 and d < 0) else d for i, d in enumerate(dims)]
            inputs[key] = (np.full(shape, b"", dtype=object) if dtype == object
                           else np.zeros(shape, dtype=dtype))
        cases.append(_Case(name, size, inputs, None, "tf2 path", 1e-6, 1e-6))
    return cases


def _read_warmup(directory: Path, result: dict) -> list:
    from saved_model_tools import manifest as manifest_lib
    from saved_model_tools import warmup

    path = directory / manifest_lib.WARMUP_FILE
    if not path.is_file():
        return []
    try:
        return warmup.read_warmup_requests(path)
    except ValueError as e:
        result["errors"].append(f"TF Serving would fail to load the model: {e}")
        return []


def _replay_warmup(requests: list, session, meta_graph, result: dict) -> None:
    """Runs each warmup request through the session, as TF Serving does when it loads."""
    for index, (signature, inputs) in enumerate(requests):
        name = f"warmup #{index}"
        first = next(iter(inputs.values()), None)
        batch = int(first.shape[0]) if first is not None and first.ndim else None
        if signature not in meta_graph.signature_def:
            result["checks"].append(dataclasses.asdict(OutputCheck(
                signature, "warmup", batch, "*", "runs", False,
                detail=f"{name} names a signature the model lacks; TF Serving would refuse to "
                       f"load the model. Fix: rewrite the warmup file.")))
            continue
        sig = meta_graph.signature_def[signature]
        try:
            outputs = _session_run(session, sig, inputs)
        except Exception as e:
            result["checks"].append(dataclasses.asdict(OutputCheck(
                signature, "warmup", batch, "*", "runs", False,
                detail=f"{name} fails ({type(e).__name__}: {_first_line(e)}); TF Serving would "
                       f"refuse to load the model. Fix: rewrite the warmup file.")))
            continue
        case = _Case(signature, batch, inputs, None, "runs", 0.0, 0.0)
        for check in _compare(case, "warmup", outputs, None, sig):
            check["detail"] = f"{name}: {check['detail']}"
            result["checks"].append(check)
