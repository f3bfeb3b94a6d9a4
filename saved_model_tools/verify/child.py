"""The program `verify` runs in its child process, where importing JAX raises ImportError.

`saved_model_tools.verify` starts `python -I -c run._CHILD_BOOTSTRAP`: it installs
`jax_blocker`'s import blocker before anything else is imported, then calls `main`, which
loads the SavedModel through the TF1 session path TF Serving uses and `tf.saved_model.load`
(TF2), in that order so that the parameters are held once, runs the cases of `cases`
through both and writes the result as JSON for the parent.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import tensorflow as tf

from saved_model_tools import inspect as inspect_lib
from saved_model_tools import manifest as manifest_lib
from saved_model_tools import warmup
from saved_model_tools.verify import cases as verify_cases
from saved_model_tools.inspect.proto import tensor_report
from saved_model_tools.verify.report import SERVE_TAG, OutputCheck

def main(request_file: str, blocked_attempts: list) -> int:
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
    cases: list[verify_cases.Case] = []
    for name in sorted(signature_defs):
        recorded = None
        if manifest is not None:
            try:
                recorded = manifest.signature(name)
            except KeyError:
                result["errors"].append(f"signature {name!r} is in the graph but not in the "
                                        f"manifest; it gets a smoke run only")
        if recorded is not None and recorded.references:
            cases.extend(verify_cases.reference_cases(directory, recorded, batch_sizes, result))
        else:
            cases.extend(verify_cases.smoke_cases(name, signature_defs[name], batch_sizes, result))
    result["had_references"] = manifest is not None and any(
        c.expected is not None for c in cases)
    result["batch_sizes"] = sorted({c.batch_size for c in cases if c.batch_size is not None})

    # Read before entering the session's graph: tf.data iterates eagerly only.
    warmup_requests = _read_warmup(directory, result)
    # The TF1 session path runs first: a closed session's Variables are freed (TF reuses
    # their memory), tf.saved_model.load's stay until the process ends, so in this order a
    # large model is held once (issue 30). The checks are reported as before: (a), (b), warmup.
    session = _run_session(directory, cases, warmup_requests)

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
        result["checks"].extend(verify_cases.compare(case, "tf2", tf2_outputs[index], case.expected,
                                         signature_defs[case.signature]))

    # (b) TF1 session path with the SignatureDef tensor names, as TF Serving runs it.
    if session.error is not None:
        result["errors"].append(session.error)
        return
    for index, case in enumerate(cases):
        sig = session.signature_defs[case.signature]
        outputs = session.outputs[index]
        if isinstance(outputs, Exception):
            result["checks"].append(_failed_call(case, "tf1-session", outputs))
            continue
        expected, what = case.expected, case.expected_name
        if expected is None:  # no reference: the TF2 path's outputs are the expectation
            expected, what = tf2_outputs.get(index), "tf2 path"
        if expected is None:
            result["checks"].extend(verify_cases.compare(case, "tf1-session", outputs, None, sig))
        else:
            result["checks"].extend(verify_cases.compare(
                dataclasses.replace(case, expected_name=what), "tf1-session", outputs,
                expected, sig))
    result["checks"].extend(session.warmup_checks)


@dataclasses.dataclass
class _SessionRun:
    """What the TF1 session path gave, kept once its session (and Variables) are gone.

    Attributes:
      error: the loader's failure, or None.
      signature_defs: the loaded MetaGraph's SignatureDefs.
      outputs: per case (in order), its outputs by name or the exception its run raised.
      warmup_checks: the warmup replay's checks.
    """
    error: str | None = None
    signature_defs: dict = dataclasses.field(default_factory=dict)
    outputs: list = dataclasses.field(default_factory=list)
    warmup_checks: list = dataclasses.field(default_factory=list)


def _run_session(directory: Path, cases: list, warmup_requests: list) -> _SessionRun:
    """Loads the model into a TF1 session as TF Serving does, runs every case and replays the
    warmup requests, and closes the session."""
    run = _SessionRun()
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        try:
            loaded_meta = tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG],
                                                               str(directory))
        except Exception as e:
            run.error = (f"the TF1 session loader (TF Serving's path) failed: "
                         f"{type(e).__name__}: {_first_line(e)}")
            return run
        run.signature_defs = dict(loaded_meta.signature_def)
        for case in cases:
            try:
                run.outputs.append(_session_run(session, run.signature_defs[case.signature],
                                                case.inputs))
            except Exception as e:
                run.outputs.append(e)
        replayed = {"checks": run.warmup_checks}
        _replay_warmup(warmup_requests, session, loaded_meta, replayed)
    return run


def _check_without_running(directory: Path, signature_defs: dict, manifest, result: dict) -> None:
    """For a model this host cannot run: both loaders work, and every signature's inputs and
    outputs are what the manifest records (names, dtypes, shapes; -1 where polymorphic)."""
    errors = []
    # TF1 first: its closed session frees the Variables, tf.saved_model.load's stay (above).
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        try:
            tf.compat.v1.saved_model.loader.load(session, [SERVE_TAG], str(directory))
        except Exception as e:
            errors.append(f"the TF1 session loader (TF Serving's path) failed: "
                          f"{type(e).__name__}: {_first_line(e)}")
    try:
        tf.saved_model.load(str(directory), tags=[SERVE_TAG])
    except Exception as e:
        errors.insert(0, f"tf.saved_model.load failed: {type(e).__name__}: {_first_line(e)}")
    result["errors"].extend(errors)
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
                graph = tensor_report(key, info, None)  # a corrupt dtype enum: a mismatch
                dims = None if graph.shape is None else list(graph.shape)
                got = f"{graph.dtype}{dims}"
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


def _failed_call(case: verify_cases.Case, path: str, e: Exception) -> dict:
    return dataclasses.asdict(OutputCheck(
        case.signature, path, case.batch_size, "*", case.expected_name, False,
        detail=f"the call raised {type(e).__name__}: {_first_line(e)}"))


def _read_warmup(directory: Path, result: dict) -> list:
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
        case = verify_cases.Case(signature, batch, inputs, None, "runs", 0.0, 0.0)
        for check in verify_cases.compare(case, "warmup", outputs, None, sig):
            check["detail"] = f"{name}: {check['detail']}"
            result["checks"].append(check)
