"""Soak: every primitive harness JAX ships, converted and run in one long-lived process.

Runs each case of `jax._src.internal_test_util.test_harnesses` (~5,600 cases over all
primitives and dtypes) through `jax2tf_native.convert` (or the peer, `--converter peer`),
eagerly and inside `tf.function(jit_compile=True)`, and compares with `jax.jit` on the same
inputs. `--converter plain` measures the plain-TF-ops lowering (`enable_xla=False`, issue 27):
the case's module (exported for CPU with the portable linear algebra) is read and checked by
`tf_ops.plain`; a `PlainLoweringError` is the case's `refused` status, else the plain ops run
eagerly and inside `tf.function(autograph=False)` (no XLA) and are compared with `jax.jit`;
a per-group table of coverage is written to `plain_coverage.md`. All cases run in ONE worker process, as a long-running user process would; the parent
only watches it:

- each case has a time bound (`--bound`, seconds); a case over it is recorded as `timeout`
  with the worker's Python stack (faulthandler), and the worker is restarted;
- the worker's stderr goes to a log the parent truncates after every case and kills the worker
  if it grows past `--log-cap-mb` during one case, so a runaway case cannot fill the disk;
- results are appended to `soak.jsonl` as each case ends and `soak.md` is rewritten every 100
  cases, so a partial run is useful; `--resume` continues after the last recorded case.

Usage:
    nice -n 10 python tools/soak_harnesses.py --out tools/results/soak
    python tools/soak_harnesses.py --every 200 --out /tmp/soak_sample   # the CI sample
    nice -n 10 python tools/soak_harnesses.py --converter plain --out tools/results/plain
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import select
import signal
import subprocess
import sys
import time

RESULT_PREFIX = "SOAKRESULT "
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run as a script (`python tools/soak_harnesses.py`), the repository is not on the path.
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
from tools import child_runner, lowering_version  # noqa: E402  (after the path)


def load_harnesses():
    # JAX's primitive harnesses are private (jax._src), used by JAX's and jax2tf's own tests.
    # Only this tool imports them (never product code): if an upgrade moves them, the soak
    # fails here at start-up with an ImportError naming the module.
    from jax._src.internal_test_util import test_harnesses
    return test_harnesses.all_harnesses


# ----------------------------------------------------------------------------- worker side

def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _tolerance(dtype):
    import numpy as np
    name = np.dtype(dtype).name
    if name.startswith("float8") or name.startswith("float4"):
        return 1e-1, 1e-1
    if name in ("float16", "bfloat16"):
        return 1e-2, 1e-2
    if name in ("float32", "complex64"):
        return 1e-4, 1e-5
    if name in ("float64", "complex128"):
        return 1e-10, 1e-12
    return None  # exact


def _compare(want, got) -> str | None:
    """None when equal within the dtype's tolerance, else a one-line reason."""
    import jax
    import numpy as np
    want_leaves, got_leaves = jax.tree.leaves(want), jax.tree.leaves(got)
    if len(want_leaves) != len(got_leaves):
        return f"{len(got_leaves)} results, JAX has {len(want_leaves)}"
    for i, (w, g) in enumerate(zip(want_leaves, got_leaves)):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape:
            return f"result {i}: shape {g.shape}, JAX {w.shape}"
        if w.dtype != g.dtype:
            return f"result {i}: dtype {g.dtype}, JAX {w.dtype}"
        tol = _tolerance(w.dtype)
        if w.dtype.kind == "V" and "float" in w.dtype.name:
            w, g = w.astype(np.float32), g.astype(np.float32)  # ml_dtypes floats (bfloat16)
        elif w.dtype.kind not in "biufc":
            w, g = w.view(np.uint8), g.view(np.uint8)  # PRNG keys and such: compare the bits
        if tol is None:
            if not np.array_equal(w, g):
                bad = int(np.sum(w != g))
                return f"result {i}: {bad} of {w.size} values differ"
            continue
        wf, gf = w.astype(np.complex128 if w.dtype.kind == "c" else np.float64), \
            g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
        if not np.allclose(wf, gf, rtol=tol[0], atol=tol[1], equal_nan=True):
            finite = np.isfinite(wf) & np.isfinite(gf)
            err = float(np.max(np.abs(wf - gf)[finite])) if finite.any() else float("nan")
            return f"result {i}: max abs error {err:.3g} (rtol {tol[0]}, atol {tol[1]})"
    return None


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _our_error(exc: BaseException) -> bool:
    from jax2tf_native import errors
    return isinstance(exc, (errors.PolymorphicShapeError, errors.ArgumentShapeError,
                            errors.ArgumentTypeError, errors.GradientSpecError,
                            errors.ExportedModuleError)) or type(exc).__module__.startswith(
                                "jax2tf_native")


def _harness_dtype(harness) -> str:
    import numpy as np
    try:
        return np.dtype(harness.dtype).name
    except TypeError:
        return str(harness.dtype)


def _run_case(harness, converter: str) -> dict:
    import faulthandler
    import jax
    import numpy as np
    import tensorflow as tf
    rec = {"status": "ok"}
    if not harness.filter("cpu"):
        return {"status": "skip", "detail": "jax_unimplemented on cpu"}
    rng = np.random.RandomState(0)
    try:
        args = harness.dyn_args_maker(rng)
        want = jax.tree.map(np.asarray, jax.jit(harness.dyn_fun)(*args))
    except Exception as exc:  # the harness does not run in JAX itself here (e.g. x64 off)
        return {"status": "skip", "detail": "jax: " + _short(exc)}
    rss0 = _rss_mb()
    if converter == "plain":
        rec = _run_plain_case(harness, args, want)
        rec["rss_growth_mb"] = round(_rss_mb() - rss0, 3)
        rec["rss_mb"] = round(_rss_mb(), 1)
        return rec
    if converter == "ours":
        import jax2tf_native
        converted = jax2tf_native.convert(harness.dyn_fun)
    else:
        from jax.experimental import jax2tf
        converted = jax2tf.convert(harness.dyn_fun)
    for mode in ("eager", "jit"):
        try:
            fn = converted if mode == "eager" else tf.function(converted, autograph=False,
                                                               jit_compile=True)
            # .numpy() first: np.asarray of a 0-d bfloat16 EagerTensor raises in TF 2.21.
            got = jax.tree.map(lambda t: np.asarray(t.numpy() if hasattr(t, "numpy") else t),
                               fn(*args))
        except Exception as exc:
            rec["status"] = f"error_{mode}"
            rec["detail"] = _short(exc)
            rec["our_error"] = _our_error(exc)
            break
        reason = _compare(want, got)
        if reason is not None:
            rec["status"] = f"mismatch_{mode}"
            rec["detail"] = reason
            break
    del converted
    rec["rss_growth_mb"] = round(_rss_mb() - rss0, 3)
    rec["rss_mb"] = round(_rss_mb(), 1)
    faulthandler.cancel_dump_traceback_later()
    return rec


def _plain_first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:400]


def _run_plain_case(harness, args, want) -> dict:
    """`--converter plain`: export (portable linalg, CPU), read, check, run plain TF ops."""
    import jax
    import numpy as np
    import tensorflow as tf
    from jax2tf_native import exporting
    from tf_ops import plain
    rec = {"status": "ok"}
    start = time.perf_counter()
    try:
        exported = exporting.export(harness.dyn_fun, tuple(args), {}, platforms=("cpu",),
                                    disabled_checks=(), linalg="portable")
    except Exception as exc:
        if _our_error(exc):  # e.g. eig: no portable form (the XLA route refuses it too)
            return {"status": "refused", "stage": "export", "detail": _short(exc)}
        return {"status": "error_export", "detail": _short(exc)}
    try:
        program = plain.read_program(exported.mlir_module())
        plain.check_program(program)
    except plain.PlainLoweringError as exc:
        return {"status": "refused", "stage": "check", "detail": _plain_first_line(exc),
                "op": _refused_op(exc)}
    except Exception as exc:
        return {"status": "error_check", "detail": _short(exc)}
    rec["check_seconds"] = round(time.perf_counter() - start, 4)
    flat = jax.tree.leaves(args)
    kept = sorted(exported.module_kept_var_idx)
    avals = exported.in_avals
    tensors = [tf.constant(np.asarray(flat[i]).astype(avals[i].dtype)) for i in kept]
    want_leaves = jax.tree.leaves(want)
    for mode in ("eager", "graph"):
        try:
            if mode == "eager":
                outputs = plain.run_program(program, tensors)
            else:
                fn = tf.function(lambda *xs: plain.run_program(program, list(xs)),
                                 autograph=False)
                outputs = fn(*tensors)
            got = [np.asarray(t.numpy() if hasattr(t, "numpy") else t) for t in outputs]
        except plain.PlainLoweringError as exc:
            # Refused while building the ops, not by check_program: still our error, but
            # later than conversion should refuse.
            return {"status": "refused", "stage": f"run_{mode}",
                    "detail": _plain_first_line(exc), "op": _refused_op(exc)}
        except Exception as exc:
            rec["status"] = f"error_{mode}"
            rec["detail"] = _short(exc)
            break
        reason = _compare(want_leaves, got)
        if reason is not None:
            # The same module run by JAX's XLA (what convert's XlaCallModule runs): where the
            # plain ops equal it, the difference is the exported module's own (the portable
            # linear algebra vs JAX's LAPACK lowering, docs/compat.md), not the lowering's.
            try:
                module_want = jax.tree.leaves(jax.tree.map(
                    np.asarray, jax.jit(exported.call)(*args)))
                module_reason = _compare(module_want, got)
            except Exception as exc:
                module_reason = "module not run by JAX: " + _short(exc)
            if module_reason is None:
                rec["status"] = "same_as_xla"
                rec["detail"] = f"{mode}: equal to the module run by XLA, which differs from " \
                                f"jax.jit: {reason}"
                continue
            if _close_normwise(want_leaves, got):
                rec["status"] = "close_normwise"
                rec["detail"] = (f"{mode}: within tolerance x the largest |value| (rounding of "
                                 f"a large factorization), not elementwise: {reason}")
                continue
            rec["status"] = f"mismatch_{mode}"
            rec["detail"] = f"{reason}; vs the module run by XLA: {module_reason}"
            break
    return rec


def _close_normwise(want, got) -> bool:
    """Every float leaf within rtol * max|want| + atol of JAX's (the harness tolerance applied
    to the largest value, not to each element), every other leaf equal: what float rounding in
    a large factorization (cholesky 200x200) gives, where small entries fail elementwise."""
    import numpy as np
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        tol = _tolerance(w.dtype) if w.shape == g.shape and w.dtype == g.dtype else None
        if tol is None:
            return False
        wf, gf = w.astype(np.complex128), g.astype(np.complex128)
        if not (np.isfinite(wf).all() and np.isfinite(gf).all()):
            return False
        scale = float(np.max(np.abs(wf))) if wf.size else 0.0
        if wf.size and float(np.max(np.abs(wf - gf))) > tol[0] * scale + tol[1]:
            return False
    return True


def _refused_op(exc: BaseException) -> str:
    import re
    found = re.search(r"cannot lower `([^`]+)`", str(exc))
    return found.group(1) if found else ""


def worker_main(converter: str, bound: float) -> None:
    import faulthandler
    # Results go to the original stdout; everything else (TF/XLA logging, prints) to stderr,
    # which the parent caps.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: F401  (import cost outside the first case's bound)
    import jax2tf_native  # noqa: F401
    # Cases are sent by name: the list's order differs between processes (it is built from
    # sets, and depends on what was imported first).
    by_name = {h.fullname: h for h in load_harnesses()}
    out.write(RESULT_PREFIX + json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        index_text, name = line.rstrip("\n").split(" ", 1)
        index = int(index_text)
        # Dump the Python stack shortly before the parent's bound so a timeout says where.
        faulthandler.dump_traceback_later(max(1.0, bound - 5.0), exit=False, file=sys.stderr)
        start = time.perf_counter()
        try:
            rec = _run_case(by_name[name], converter)
        except Exception as exc:  # the harness machinery itself
            rec = {"status": "harness_error", "detail": _short(exc)}
        faulthandler.cancel_dump_traceback_later()
        rec["seconds"] = round(time.perf_counter() - start, 3)
        rec["index"] = index
        rec["name"] = name[:200]
        rec["group"] = by_name[name].group_name
        rec["dtype"] = _harness_dtype(by_name[name])
        out.write(RESULT_PREFIX + json.dumps(rec) + "\n")


# ----------------------------------------------------------------------------- parent side

class _Worker:
    def __init__(self, converter: str, bound: float, log_path: str):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--converter", converter,
             "--bound", str(bound)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=_REPO,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1"),
            start_new_session=True)
        # Its own session is its own scheduling group: `nice -n 10` on this command would
        # not reach it without this (tools/child_runner.py says why).
        child_runner.renice(self.proc.pid, 0)
        self.buffer = b""
        self.cases = 0

    def send(self, index: int, name: str) -> None:
        self.proc.stdin.write(f"{index} {name}\n".encode())
        self.proc.stdin.flush()

    def receive(self, bound: float, log_cap: int) -> tuple[dict | None, str]:
        """(record, '') or (None, 'timeout' | 'crash' | 'runaway_output')."""
        deadline = time.monotonic() + bound
        fd = self.proc.stdout.fileno()
        while True:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(RESULT_PREFIX):
                    return json.loads(text[len(RESULT_PREFIX):]), ""
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, "timeout"
            if os.path.getsize(self.log_path) > log_cap:
                return None, "runaway_output"
            ready, _, _ = select.select([fd], [], [], min(remaining, 2.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.proc.wait()
                    return None, f"crash (exit {self.proc.returncode})"
                self.buffer += chunk

    def log_tail(self, size: int = 3000) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(max(0, os.path.getsize(self.log_path) - size))
            return log.read().decode(errors="replace")

    def truncate_log(self) -> None:
        os.truncate(self.log_path, 0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def _load_done(path: str) -> dict[int, dict]:
    done = {}
    if os.path.exists(path):
        with open(path) as results:
            for line in results:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill
                done[rec["index"]] = rec
    return done


def _slope_line(ran: list[dict]) -> str:
    """Worker RSS growth per converted function after warm-up, in the longest-lived worker
    (its case 100 to its last): the long-run cost, without one-time allocations."""
    segments, current = [], []
    for r in ran:
        if "rss_mb" not in r:
            continue
        if current and r.get("cases_in_worker", 0) <= current[-1].get("cases_in_worker", 0):
            segments.append(current)
            current = []
        current.append(r)
    segments.append(current)
    points = max(segments, key=len)
    if len(points) < 200:
        return "- RSS growth per function after warm-up: too few cases in one worker yet"
    first, last = points[100], points[-1]
    count = last["cases_in_worker"] - first["cases_in_worker"]
    return (f"- RSS growth per converted function after warm-up, one worker's cases "
            f"{first['cases_in_worker']} -> {last['cases_in_worker']}: "
            f"{(last['rss_mb'] - first['rss_mb']) / count:.3f} MB "
            f"({first['rss_mb']:.0f} -> {last['rss_mb']:.0f} MB)")


def write_summary(records: list[dict], path: str, converter: str, total: int,
                  wall: float) -> None:
    statuses = collections.Counter(r["status"] for r in records)
    ran = [r for r in records if r["status"] != "skip"]
    growth = sum(r.get("rss_growth_mb", 0.0) for r in ran)
    rss = [r["rss_mb"] for r in ran if "rss_mb" in r]
    slowest = sorted(ran, key=lambda r: -(r.get("seconds") or 0))[:5]
    lines = [
        f"# Soak: JAX's primitive harnesses through `{converter}`", "",
        "Generated by `tools/soak_harnesses.py` (one worker process for all cases, eager and",
        "`tf.function(jit_compile=True)`, compared with `jax.jit` on the same inputs).", "",
        f"- cases recorded: {len(records)} of {total}"
        + ("" if wall != wall else f" ({wall / 60:.1f} min wall)"),
        lowering_version.describe(records, "case"),
        f"- converted and run: {len(ran)}; skipped (JAX itself does not run them here): "
        f"{statuses.get('skip', 0)}",
        "- status counts: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        f"- worker RSS growth summed over converted functions: {growth:.1f} MB "
        f"({growth / max(1, len(ran)):.3f} MB per function)"
        + (f"; worker RSS at the end {rss[-1]:.0f} MB" if rss else ""),
        _slope_line(ran),
        "- slowest cases: " + ", ".join(f"{r['name'][:60]} {r.get('seconds') or 0:.1f}s"
                                        for r in slowest), "",
        "## Not ok, by group", "",
        "| group | status | cases | first detail |", "|---|---|---|---|"]
    groups = collections.OrderedDict()
    for r in records:
        if r["status"] in ("ok", "skip"):
            continue
        key = (r["group"], r["status"])
        groups.setdefault(key, []).append(r)
    for (group, status), recs in groups.items():
        detail = recs[0].get("detail", "").replace("|", "/")[:160]
        lines.append(f"| {group} | {status} | {len(recs)} | {detail} |")
    tmp = path + ".tmp"
    with open(tmp, "w") as summary:
        summary.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


_PLAIN_KINDS = ("ok", "same_as_xla", "close_normwise", "refused", "mismatch", "error",
                "timeout")


def _plain_kind(status: str) -> str:
    if status in ("ok", "same_as_xla", "close_normwise", "refused", "timeout", "skip"):
        return status
    if status.startswith("mismatch"):
        return "mismatch"
    return "error"  # error_*, crash, runaway_output, harness_error


def write_plain_table(records: list[dict], path: str, total: int, jsonl_path: str,
                      note: str | None = None) -> None:
    """The coverage table of `--converter plain`: per harness group, what lowers and matches,
    what is refused (and why), and the cases that must never happen (mismatch, error, hang)."""
    ran = [r for r in records if r["status"] != "skip"]
    kinds = collections.Counter(_plain_kind(r["status"]) for r in ran)
    f32 = [r for r in ran if r.get("dtype") == "float32"]
    f32_ok = sum(r["status"] == "ok" for r in f32)
    f32_same = sum(r["status"] in ("same_as_xla", "close_normwise") for r in f32)

    def pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:.1f}%" if b else "-"

    def refusal_reason(r: dict) -> str:
        detail = r.get("detail", "")
        if ": " in detail and "cannot lower" in detail:
            # "enable_xla=False cannot lower `op` (dtypes) at file:line to plain TensorFlow
            # ops: <why>. Fix: ..." -> "`op`: why"
            why = detail.split(" to plain TensorFlow ops: ", 1)[-1].split(". Fix:", 1)[0]
            return f"`{r.get('op', '?')}`: {why}"
        return detail[:120]

    lines = [
        "# Plain-TF-ops coverage (`enable_xla=False`): JAX's primitive harnesses", "",
        "Generated by `tools/soak_harnesses.py --converter plain`. Each case "
        "is exported",
        "for CPU with the portable linear algebra, read and checked by `tf_ops.plain` "
        "(`check_program`); a",
        "`PlainLoweringError` is **refused** (our error at conversion). Otherwise the plain TF ops "
        "run eagerly",
        "and in `tf.function(autograph=False)` (no XLA) and are compared with `jax.jit` on the "
        "same inputs",
        "(floats within the soak's per-dtype tolerances, everything else exactly). Where they "
        "differ, the",
        "same exported module is also run by JAX's XLA (what the default `XlaCallModule` "
        "runs): **same_as_xla**",
        "means the plain ops equal it, and the difference is the module's own (the portable "
        "linear algebra",
        "vs JAX's LAPACK lowering, docs/compat.md), not the plain lowering's. "
        "**close_normwise**: within the",
        "tolerance times the largest value of the result, not element by element (float "
        "rounding in a",
        "large factorization). **mismatch** (a wrong value), "
        "**error** (a raw TF/other error) and **timeout** must never happen.", "",
        f"- cases recorded: {len(records)} of {total}"
        + ("" if len(records) == total else " (**partial run**: the groups below cover only "
           "the recorded cases)"),
        f"- run (JAX itself runs them here): {len(ran)}; skipped: {len(records) - len(ran)}",
        "- " + ", ".join(f"{k} {kinds.get(k, 0)} ({pct(kinds.get(k, 0), len(ran))})"
                         for k in _PLAIN_KINDS),
        f"- **float32 cases: {f32_ok + f32_same} of {len(f32)} lower "
        f"({pct(f32_ok + f32_same, len(f32))})**: {f32_ok} equal jax.jit, {f32_same} "
        f"same_as_xla or close_normwise; "
        f"refused {sum(r['status'] == 'refused' for r in f32)}, mismatch "
        f"{sum(_plain_kind(r['status']) == 'mismatch' for r in f32)}, error "
        f"{sum(_plain_kind(r['status']) in ('error', 'timeout') for r in f32)}",
        f"- raw results, one JSON line per case: `{jsonl_path}`"]
    if note:
        lines.append(f"- {note}")
    reran = [r for r in records if "rerun_of" in r]
    if reran:
        lines.append(
            f"- {len(reran)} cases the run first recorded as not ok (refused, or failing) were "
            f"run again at its end with the final tree (`--rerun-not-ok`), and their newer "
            f"result is the one counted: "
            + ", ".join(f"{n} {before} -> {after}" for (before, after), n in
                        collections.Counter((r["rerun_of"], r["status"])
                                            for r in reran).most_common()))
    lines += ["",
        "| group | cases | ok | same_as_xla | close_normwise | refused | mismatch | error | "
        "timeout | float32 lowered | main refusal / failure |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for r in ran:
        groups[r["group"]].append(r)
    for group in sorted(groups):
        recs = groups[group]
        counts = collections.Counter(_plain_kind(r["status"]) for r in recs)
        g32 = [r for r in recs if r.get("dtype") == "float32"]
        bad = [r for r in recs if _plain_kind(r["status"]) in ("mismatch", "error", "timeout")]
        refused = collections.Counter(refusal_reason(r) for r in recs
                                      if r["status"] == "refused")
        note = ""
        if bad:
            note = f"**{bad[0]['status']}**: {bad[0].get('detail', '')[:100]}"
        elif refused:
            reason, n = refused.most_common(1)[0]
            note = f"{n}x {reason[:140]}"
        lines.append(
            f"| {group} | {len(recs)} | {counts.get('ok', 0)} | "
            f"{counts.get('same_as_xla', 0)} | {counts.get('close_normwise', 0)} | "
            f"{counts.get('refused', 0)} | "
            f"{counts.get('mismatch', 0)} | {counts.get('error', 0)} | "
            f"{counts.get('timeout', 0)} | "
            + (f"{sum(_plain_kind(r['status']) in ('ok', 'same_as_xla', 'close_normwise') for r in g32)}/{len(g32)}"
               if g32 else "-")
            + " | " + note.replace("|", "/").replace("\n", " ") + " |")
    refusals = collections.Counter(refusal_reason(r) for r in ran if r["status"] == "refused")
    lines += ["", "## Refusals by reason", "", "| cases | op: reason |", "|---:|---|"]
    lines += [f"| {n} | {reason.replace('|', '/')[:200]} |"
              for reason, n in refusals.most_common()]
    lines += ["", "## Mismatches, errors and timeouts (must not happen)", "",
              "| case | status | detail |", "|---|---|---|"]
    lines += [f"| {r['name'][:90]} | {r['status']} | "
              f"{str(r.get('detail', ''))[:160].replace('|', '/')} |"
              for r in ran if _plain_kind(r["status"]) in ("mismatch", "error", "timeout")]
    tmp = path + ".tmp"
    with open(tmp, "w") as table:
        table.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _write_outputs(records: list[dict], args, total: int, wall: float) -> None:
    write_summary(records, os.path.join(args.out, "soak.md"), args.converter, total, wall)
    if args.converter == "plain":
        jsonl = os.path.relpath(os.path.join(args.out, "soak.jsonl"), _REPO)
        write_plain_table(records, args.table or os.path.join(args.out, "plain_coverage.md"),
                          total, jsonl, args.note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(_REPO, "tools", "results", "soak"))
    parser.add_argument("--converter", choices=("ours", "peer", "plain"), default="ours")
    parser.add_argument("--bound", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--log-cap-mb", type=float, default=20.0)
    parser.add_argument("--every", type=int, default=1, help="run every N-th case (sample)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--only", default=None, help="case name substring")
    parser.add_argument("--rerun-not-ok", metavar="DIR", default=None,
                        help="run only the cases DIR/soak.jsonl records as neither ok nor "
                             "skip (e.g. refusals after new lowerings landed); merge after "
                             "with --merge OUT DIR")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--merge", nargs="+", metavar="DIR", default=None,
                        help="write --out's summary from the soak.jsonl of these runs "
                             "(e.g. two ranges run side by side) and exit")
    parser.add_argument("--table", default=None,
                        help="--converter plain: where the coverage table goes "
                             "(default: OUT/plain_coverage.md)")
    parser.add_argument("--note", default=None,
                        help="--converter plain: a line for the table's header (e.g. the tree)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.merge:
        merged: dict[int, dict] = {}
        for directory in args.merge:
            for index, rec in _load_done(os.path.join(directory, "soak.jsonl")).items():
                merged.setdefault(index, rec)
        records = [merged[i] for i in sorted(merged)]
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "soak.jsonl"), "w") as out:
            out.writelines(json.dumps(r) + "\n" for r in records)
        _write_outputs(records, args, len(load_harnesses()), float("nan"))
        return 0
    if args.worker:
        worker_main(args.converter, args.bound)
        return 0

    harnesses = sorted(load_harnesses(), key=lambda h: h.fullname)
    indices = [i for i in range(args.start, len(harnesses), args.every)
               if args.only is None or args.only in harnesses[i].fullname]
    earlier = {}
    if args.rerun_not_ok:
        earlier = {i: r["status"] for i, r in _load_done(
            os.path.join(args.rerun_not_ok, "soak.jsonl")).items()
            if r["status"] not in ("ok", "skip")}
        indices = [i for i in indices if i in earlier]
    if args.limit is not None:
        indices = indices[:args.limit]
    jsonl = os.path.join(args.out, "soak.jsonl")
    done = _load_done(jsonl) if args.resume else {}
    lowering = lowering_version.stamp()
    other = lowering_version.foreign(list(done.values()))
    if other:
        print(f"{jsonl} holds cases run on another lowering (commits "
              f"{lowering_version.commits_of(other)}; this "
              f"checkout: {lowering['commit']}, lowering {lowering['lowering']}): a soak's "
              f"results stand for one lowering. Run without --resume (or with another --out) "
              f"to start again.", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    if not args.resume and os.path.exists(jsonl):
        os.remove(jsonl)
    log_path = os.path.join(args.out, "worker.log")
    log_cap = int(args.log_cap_mb * 1024 * 1024)
    records = [done[i] for i in indices if i in done]
    todo = [i for i in indices if i not in done]
    start = time.monotonic()
    worker = None
    with open(jsonl, "a") as results:
        for n, index in enumerate(todo):
            if worker is None:
                worker = _Worker(args.converter, args.bound, log_path)
                ready, why = worker.receive(600.0, log_cap)  # imports of TF and JAX
                if ready is None:
                    print(f"worker did not start: {why}\n{worker.log_tail()}", file=sys.stderr)
                    return 2
            worker.send(index, harnesses[index].fullname)
            rec, failure = worker.receive(args.bound, log_cap)
            if rec is None:
                rec = {"index": index, "status": failure.split(" ")[0], "detail": failure,
                       "seconds": args.bound if failure == "timeout" else None,
                       "cases_in_worker": worker.cases, "log_tail": worker.log_tail()}
                worker.kill()
                worker = None
            else:
                worker.cases += 1
                rec["cases_in_worker"] = worker.cases
                if rec["status"] not in ("ok", "skip"):
                    rec["log_tail"] = worker.log_tail(600)
                worker.truncate_log()
            if index in earlier:
                rec["rerun_of"] = earlier[index]
            rec.update(lowering)
            rec.setdefault("name", harnesses[index].fullname[:200])
            rec.setdefault("group", harnesses[index].group_name)
            results.write(json.dumps(rec) + "\n")
            results.flush()
            records.append(rec)
            if rec["status"] not in ("ok", "skip", "refused"):
                print(f"[{n + 1}/{len(todo)}] {rec['status']}: {rec['name'][:100]}: "
                      f"{str(rec.get('detail'))[:200]}", flush=True)
            if (n + 1) % 100 == 0:
                print(f"[{n + 1}/{len(todo)}] {time.monotonic() - start:.0f}s", flush=True)
                _write_outputs(records, args, len(indices), time.monotonic() - start)
    if worker is not None:
        worker.kill()
    _write_outputs(records, args, len(indices), time.monotonic() - start)
    bad = [r for r in records if r["status"] in ("timeout", "crash", "runaway_output")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
