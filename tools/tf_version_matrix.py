"""Which TensorFlow versions run which back-compat artifacts: the data behind "oldest TF that can
run this" (used by the SavedModel `inspect` command).

Not part of the test run: it installs TensorFlow 2.17 ... 2.21 from PyPI, each in its own venv
under a cache directory, and runs every artifact of tests/backcompat/data in each through
`XlaCallModule` (eagerly), with a small runner that needs only TF and numpy. Each artifact is
tried in three forms:

  frozen      the module bytes exactly as JAX wrote them (calling convention of the artifact);
  for_tf      the same module with LAPACK custom calls rewritten to portable StableHLO
              (`jax2tf_native.lapack_rewrite`, as call_exported does), composites inlined and
              re-serialized at that TF's own StableHLO version (what jax2tf-native writes for a
              consumer TF);
  for_tf_cc   as `for_tf`, re-exported at the newest calling convention that TF runs, when that
              is older than the artifact's (what jax2tf-native's export negotiates).

A form "runs" when the op executes and matches the frozen outputs within the artifact's
tolerance; artifacts whose custom calls our allowlist marks as not TF-runnable are expected to
fail in every TF and are reported as such.

Usage:
    python tools/tf_version_matrix.py [--versions 2.17 2.21] [--cache-dir DIR]

Besides the artifacts, small probe functions (erf-GELU, a linear solve, top_k, and ops, types
and attributes newer StableHLO versions added) are exported the way `target_tf` exports them and
run in each TF, so the table says which of them each TF runs and which JAX cannot write for it.

Writes saved_model_tools/data/tf_version_matrix.json (shipped; read by inspect),
tf_ops/data/tf_targets.json (shipped; the table behind `target_tf=`) and
tools/results/tf_version_matrix.md. `--targets-only` rewrites tf_targets.json from the committed
matrix without running anything.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_VERSIONS = ("2.17", "2.18", "2.19", "2.20", "2.21")
# Shared with `jax2tf-native verify --tf` (saved_model_tools.tf_envs): one venv per TF version.
DEFAULT_CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")
                             ) / "jax2tf_native" / "tf_envs"
RESULTS = ROOT / "tools" / "results"
# The JSON ships inside the package: `inspect` reads it for "oldest TF that can run this".
MATRIX_JSON = ROOT / "saved_model_tools" / "data" / "tf_version_matrix.json"
# The table `target_tf=` reads (tf_ops.tf_targets); derived from MATRIX_JSON by targets_table.
TARGETS_JSON = ROOT / "tf_ops" / "data" / "tf_targets.json"
FORMS = ("frozen", "for_tf", "for_tf_cc")
PROBE_FORM = "probe"


def _probes() -> dict:
    """name -> (function, example input): exported per TF as `target_tf` would export them."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    x = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16 - 0.3)
    return {
        "erf_gelu": (lambda v: v * 0.5 * (1 + jax.lax.erf(v / np.sqrt(2).astype(np.float32))), x),
        "linalg_solve": (lambda a: jnp.linalg.solve(a + 4 * jnp.eye(4), a), x),
        "top_k": (lambda v: jax.lax.top_k(v, 2)[0], x),
        "arcsin": (jnp.arcsin, x),
        "cholesky": (lambda a: jnp.linalg.cholesky(a @ a.T + jnp.eye(4)), x),
        "eigh": (lambda a: jnp.linalg.eigh(a + a.T)[0], x),
        "float8_e4m3fn": (lambda v: v.astype(jnp.float8_e4m3fn).astype(jnp.float32), x),
        "float8_e4m3": (lambda v: v.astype(jnp.float8_e4m3).astype(jnp.float32), x),
        # Unsigned exponent-only type: negative inputs become NaN, which never compares equal.
        "float8_e8m0fnu": (lambda v: v.astype(jnp.float8_e8m0fnu).astype(jnp.float32),
                           np.abs(x) + np.float32(0.125)),
        "float4_e2m1fn": (lambda v: v.astype(jnp.float4_e2m1fn).astype(jnp.float32), x),
        "dot_algorithm": (lambda v: jax.lax.dot(
            v, v, precision=jax.lax.DotAlgorithmPreset.F32_F32_F32), x),
        "exp_accuracy": (lambda v: jax.lax.exp(
            v, accuracy=jax.lax.Tolerance(atol=1e-5, rtol=1e-5, ulps=2)), x),
    }

# Runs inside each TF venv: only TF and numpy. Kept as text so it can be written into the venv.
RUNNER = textwrap.dedent(r'''
    """Runs prepared back-compat payloads through XlaCallModule (TF + numpy only)."""
    import inspect, json, os, pathlib, re, sys
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla as tfxla
    from tensorflow.compiler.mlir.stablehlo import stablehlo

    def info():
        try:
            max_cc = int(tfxla.call_module_maximum_supported_version())
        except AttributeError:
            max_cc = None
        return {"tf_version": tf.__version__, "stablehlo_current": stablehlo.get_current_version(),
                "stablehlo_minimum": stablehlo.get_minimum_version(),
                "max_calling_convention": max_cc}

    def run_one(module, meta, inputs, expected):
        params = inspect.signature(tfxla.call_module).parameters
        kwargs = dict(version=meta["version"], module=module,
                      Tout=[tf.as_dtype(d) for d in meta["out_dtypes"]],
                      Sout=[tuple(s) for s in meta["out_shapes"]],
                      platforms=meta["platforms"])
        optional = dict(disabled_checks=meta["disabled_checks"], has_token_input_output=False,
                        function_list=[], use_shardy_partitioner=False)
        kwargs.update({k: v for k, v in optional.items() if k in params})
        args = [tf.constant(inputs[i]) for i in meta["kept_var_idx"]]
        try:
            outs = tfxla.call_module(args, **kwargs)
        except Exception as e:  # TF raises many types; we record the first line
            text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", str(e)).strip()
            first = text.splitlines()[0] if text else type(e).__name__
            return "error", f"{type(e).__name__}: {first[:300]}"
        outs = [np.asarray(o) for o in outs]
        if len(outs) != len(expected):
            return "mismatch", f"{len(outs)} outputs, expected {len(expected)}"
        for i, (got, want) in enumerate(zip(outs, expected)):
            if got.shape != want.shape or got.dtype != want.dtype:
                return "mismatch", f"output {i}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
            if np.issubdtype(want.dtype, np.inexact):
                ok = np.allclose(got, want, rtol=meta["rtol"], atol=meta["atol"])
            else:
                ok = np.array_equal(got, want)
            if not ok:
                return "mismatch", f"output {i} differs"
        return "ok", ""

    def main():
        if sys.argv[1] == "info":
            print(json.dumps(info()))
            return
        payload = pathlib.Path(sys.argv[2])
        results = {}
        for art in sorted(p for p in payload.iterdir() if p.is_dir()):
            data = np.load(art / "data.npz")
            inputs = [data[f"in_{i}"] for i in range(sum(k.startswith("in_") for k in data.files))]
            expected = [data[f"out_{i}"] for i in range(sum(k.startswith("out_") for k in data.files))]
            results[art.name] = {}
            for form_meta in sorted(art.glob("*.json")):
                meta = json.loads(form_meta.read_text())
                module = (art / (form_meta.stem + ".bin")).read_bytes()
                status, detail = run_one(module, meta, inputs, expected)
                results[art.name][form_meta.stem] = {"status": status, "detail": detail,
                                                      "version": meta["version"],
                                                      "stablehlo": meta["stablehlo"]}
        print(json.dumps({"info": info(), "results": results}))

    main()
''')


def _log(message: str) -> None:
    print(f"[tf_version_matrix] {message}", flush=True)


def ensure_venv(cache: pathlib.Path, version: str) -> pathlib.Path:
    """A venv with tensorflow-cpu==<version>.* (created and installed once, then reused)."""
    from saved_model_tools import tf_envs
    return tf_envs.ensure_tf_env(version, cache=cache, progress=_log)


def tf_info(python: pathlib.Path, runner: pathlib.Path) -> dict:
    out = subprocess.run([str(python), str(runner), "info"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _form_meta(exported, *, stablehlo: str, rtol: float, atol: float) -> dict:
    import jax
    return {
        "version": exported.calling_convention_version,
        "stablehlo": stablehlo,
        "platforms": [p.upper() for p in exported.platforms],
        "disabled_checks": [str(c) for c in exported.disabled_safety_checks],
        "kept_var_idx": sorted(exported.module_kept_var_idx),
        "out_dtypes": [jax.numpy.dtype(a.dtype).name for a in exported.out_avals],
        "out_shapes": [[d if isinstance(d, int) else None for d in a.shape]
                       for a in exported.out_avals],
        "rtol": rtol, "atol": atol,
    }


def _retarget(module_bytes: bytes, stablehlo_version: str) -> bytes:
    import jax.interpreters.mlir as jax_mlir
    from jax.extend import mlir as jax_extend_mlir
    from tf_ops import module_for_tf
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(module_bytes)
        module_for_tf.inline_composites_as_calls(module)
        return bytes(jax_extend_mlir.serialize_portable_artifact(module, stablehlo_version))


def _reexport(name: str, calling_convention: int):
    """The artifact's spec exported again at `calling_convention` (None if that fails)."""
    import jax
    from tools.backcompat import artifacts, generate
    spec = artifacts.ARTIFACTS_BY_NAME.get(name)
    if spec is None:
        return None
    previous = jax.config.jax_export_calling_convention_version
    jax.config.update("jax_export_calling_convention_version", calling_convention)
    try:
        with generate.spec_config(spec):
            return generate.export_spec(spec)
    finally:
        jax.config.update("jax_export_calling_convention_version", previous)


def _lapack_rewritten(exported, artifact):
    """`exported` with its LAPACK custom calls rewritten, as `call_exported` runs it."""
    import jax
    from jax2tf_native import lapack_rewrite
    with jax.enable_x64(bool(artifact.metadata["requires_x64"])):
        return lapack_rewrite.rewrite_exported(exported).exported


def prepare_payload(payload: pathlib.Path, info: dict) -> dict:
    """Writes every artifact in every form for one TF (described by `info`)."""
    import jax
    from tools.backcompat import storage
    if payload.exists():
        shutil.rmtree(payload)
    notes = {}
    for artifact in storage.read_all():
        exported = jax.export.deserialize(artifact.serialized)
        directory = payload / artifact.name
        directory.mkdir(parents=True)
        shutil.copy(storage.DEFAULT_DATA_DIR / artifact.name / storage.DATA_FILE,
                    directory / "data.npz")
        tol = dict(rtol=artifact.rtol, atol=artifact.atol)
        forms = {"frozen": (exported, exported.mlir_module_serialized, "as written by JAX")}
        try:
            rewritten = _lapack_rewritten(exported, artifact)
            forms["for_tf"] = (exported, _retarget(rewritten.mlir_module_serialized,
                                                   info["stablehlo_current"]),
                               info["stablehlo_current"])
        except Exception as e:  # JAX cannot write that old a StableHLO
            notes[f"{artifact.name}/for_tf"] = f"{type(e).__name__}: {str(e)[:200]}"
        max_cc = info["max_calling_convention"] or 0
        if max_cc < exported.calling_convention_version:
            try:
                with jax.enable_x64(bool(artifact.metadata["requires_x64"])):
                    older = _reexport(artifact.name, max_cc)
                older = _lapack_rewritten(older, artifact)
                forms["for_tf_cc"] = (older, _retarget(older.mlir_module_serialized,
                                                       info["stablehlo_current"]),
                                      info["stablehlo_current"])
            except Exception as e:  # JAX cannot write calling convention max_cc any more
                notes[f"{artifact.name}/for_tf_cc"] = f"{type(e).__name__}: {str(e)[:200]}"
        for form, (exp, blob, stablehlo) in forms.items():
            (directory / f"{form}.bin").write_bytes(blob)
            meta = _form_meta(exp, stablehlo=stablehlo, **tol)
            (directory / f"{form}.json").write_text(json.dumps(meta))
    return notes


def prepare_probes(payload: pathlib.Path, info: dict) -> dict:
    """Writes each probe exported at the TF's calling convention and StableHLO version (as
    `target_tf` does); returns {probe: error} for probes JAX cannot write for that TF."""
    import jax
    import numpy as np
    from jax2tf_native import linalg_portable
    from tf_ops import module_for_tf
    cc = min(info["max_calling_convention"] or 0,
             jax.export.maximum_supported_calling_convention_version)
    cannot = {}
    for name, (fn, x) in _probes().items():
        previous = jax.config.jax_export_calling_convention_version
        jax.config.update("jax_export_calling_convention_version", cc)
        try:
            with linalg_portable.export_scope(platforms=("cpu",)) as kwargs:
                exported = jax.export.export(jax.jit(fn), **kwargs)(
                    jax.ShapeDtypeStruct(x.shape, x.dtype))
        finally:
            jax.config.update("jax_export_calling_convention_version", previous)
        try:
            blob = module_for_tf.module_bytes_for_tf(exported.mlir_module_serialized,
                                                     stablehlo_version=info["stablehlo_current"])
        except Exception as e:  # what JAX cannot write for this TF is a result, not a failure
            cannot[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            continue
        # One payload per probe: each runs in its own process, since a probe may crash TF
        # (measured: dot_algorithm segfaults TF 2.18).
        directory = payload / name / f"probe_{name}"
        directory.mkdir(parents=True)
        np.savez(directory / "data.npz", in_0=x, out_0=np.asarray(jax.jit(fn)(x)))
        (directory / f"{PROBE_FORM}.bin").write_bytes(blob)
        meta = _form_meta(exported, stablehlo=info["stablehlo_current"], rtol=1e-5, atol=1e-5)
        (directory / f"{PROBE_FORM}.json").write_text(json.dumps(meta))
    return cannot


def run_probe(python: pathlib.Path, runner: pathlib.Path, payload: pathlib.Path) -> dict:
    """Runs one probe's payload in its own process; a crash is recorded as status "crash"."""
    proc = subprocess.run([str(python), str(runner), "run", str(payload)],
                          capture_output=True, text=True)
    if proc.returncode == 0:
        return json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
    return {f"probe_{payload.name}": {PROBE_FORM: {
        "status": "crash", "detail": f"process exited with {proc.returncode}: {last}",
        "version": None, "stablehlo": None}}}


def targets_table(report: dict) -> dict:
    """The `target_tf` table: each TF in which every TF-runnable artifact ran in the form
    `target_tf` writes (its calling convention and StableHLO version), with the probes."""
    blocked = report["expected_tf_failures"]
    targets = {}
    for version, entry in report["tf"].items():
        info = entry["info"]
        form = ("for_tf_cc" if info["max_calling_convention"]
                < max(report["artifact_calling_conventions"]) else "for_tf")
        runnable = [a for a in report["artifacts"] if a not in blocked]
        ran = [a for a in runnable
               if entry["results"].get(a, {}).get(form, {}).get("status") == "ok"]
        if len(ran) != len(runnable):
            continue  # not verified: `target_tf` must not offer it
        probes = {name[len("probe_"):]: r[PROBE_FORM]["status"] for name, r in
                  entry["results"].items() if name.startswith("probe_")}
        probes.update({name: "cannot be written" for name in
                       report.get("probes_not_written", {}).get(version, {})})
        targets[version] = {
            "measured_release": info["tf_version"],
            "stablehlo_version": info["stablehlo_current"],
            "max_calling_convention": info["max_calling_convention"],
            "verified": f"{len(ran)}/{len(runnable)} artifacts ran as `{form}`",
            "probes": dict(sorted(probes.items())),
        }
    return {"generated": report["generated"], "jax_version": report["jax_version"],
            "source": "tools/tf_version_matrix.py", "targets": targets}


def expected_tf_failures() -> dict[str, list[str]]:
    """Artifacts our allowlist says TF cannot run on CPU, with the blocking targets: LAPACK
    targets only when this build cannot rewrite them (then every form fails)."""
    import jax
    from jax2tf_native import lapack_rewrite
    from tools.backcompat import storage
    from tf_ops.custom_call_allowlist import ALLOWLIST_BY_TARGET
    blocked = {}
    for artifact in storage.read_all():
        not_rewritten = set()
        if any(lapack_rewrite.routine_of(t) for t in artifact.custom_call_targets):
            with jax.enable_x64(bool(artifact.metadata["requires_x64"])):
                result = lapack_rewrite.rewrite_exported(
                    jax.export.deserialize(artifact.serialized))
            not_rewritten = {f.target for f in result.failures}
        targets = [t for t in artifact.custom_call_targets
                   if (t not in ALLOWLIST_BY_TARGET
                       or not ALLOWLIST_BY_TARGET[t].runs_in_tf_on("cpu"))
                   and (lapack_rewrite.routine_of(t) is None or t in not_rewritten)]
        if targets:
            blocked[artifact.name] = targets
    return blocked


def write_markdown(report: dict, path: pathlib.Path) -> None:
    versions = list(report["tf"])
    blocked = report["expected_tf_failures"]
    lines = [
        "# TensorFlow version matrix for jax2tf-native artifacts", "",
        f"Generated {report['generated']} by `tools/tf_version_matrix.py` with JAX "
        f"{report['jax_version']}; artifacts: tests/backcompat/data (calling convention "
        f"{', '.join(map(str, report['artifact_calling_conventions']))}). CPU, eager "
        f"XlaCallModule, outputs compared with the frozen ones.", "",
        "Forms: `frozen` = bytes as JAX wrote them; `for_tf` = LAPACK custom calls rewritten "
        "to portable StableHLO (as call_exported does) and re-serialized at that TF's "
        "StableHLO version; `for_tf_cc` = also re-exported at that TF's newest calling "
        "convention (only when older than the artifact's). The cpu_lapack_* artifacts run "
        "only rewritten: their `frozen` form fails in every TF by design.", "",
        "## Summary", "",
        "| TF | StableHLO (current / min) | max calling convention | frozen runs | for_tf runs "
        "| for_tf_cc runs |", "|---|---|---|---|---|---|"]
    runnable = [a for a in report["artifacts"] if a not in blocked]
    for v in versions:  # (probes are reported in their own section)
        entry = report["tf"][v]
        info = entry["info"]
        counts = []
        for form in FORMS:
            ok = sum(1 for a in runnable
                     if entry["results"].get(a, {}).get(form, {}).get("status") == "ok")
            tried = sum(1 for a in runnable if form in entry["results"].get(a, {}))
            counts.append(f"{ok}/{len(runnable)}" if tried else "n/a")
        lines.append(f"| {info['tf_version']} | {info['stablehlo_current']} / "
                     f"{info['stablehlo_minimum']} | {info['max_calling_convention']} | "
                     + " | ".join(counts) + " |")
    lines += ["", f"Counts are over the {len(runnable)} artifacts our allowlist says TF can run; "
              f"the {len(blocked)} others ({', '.join(sorted(blocked))}) must fail in every TF "
              f"(see the last column below).", "",
              "## Oldest TF that runs each kind of module", ""]
    for form in FORMS:
        working = [v for v in versions if all(
            report["tf"][v]["results"].get(a, {}).get(form, {}).get("status") == "ok"
            for a in runnable)]
        lines.append(f"- `{form}`: " + (f"TF {working[0]} (all runnable artifacts)" if working
                                        else "no TF version tested runs all of them"))
    lines += ["", "## Per artifact", "",
              "Cell: status of frozen / for_tf / for_tf_cc (`ok`, `err`, `mism`, `-` = not "
              "tried).", "",
              "| artifact | " + " | ".join(f"TF {v}" for v in versions) + " | TF expected |",
              "|---|" + "---|" * (len(versions) + 1)]
    short = {"ok": "ok", "error": "err", "mismatch": "mism", "crash": "crash"}
    for name in report["artifacts"]:
        cells = []
        for v in versions:
            res = report["tf"][v]["results"].get(name, {})
            cells.append(" / ".join(short.get(res.get(f, {}).get("status"), "-") for f in FORMS))
        expected = f"fails ({', '.join(blocked[name][:2])})" if name in blocked else "runs"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {expected} |")
    lines += ["", "## First error per TF version and form", ""]
    for v in versions:
        for form in FORMS:
            errors = [(a, r[form]["detail"]) for a, r in report["tf"][v]["results"].items()
                      if form in r and r[form]["status"] != "ok" and a not in blocked]
            if errors:
                lines.append(f"- TF {v}, `{form}`, {len(errors)} failing, e.g. {errors[0][0]}: "
                             f"`{errors[0][1][:240]}`")
    if report.get("probes_not_written"):
        probes = sorted({name[len("probe_"):] for v in versions
                         for name in report["tf"][v]["results"] if name.startswith("probe_")}
                        | {p for v in versions for p in report["probes_not_written"].get(v, {})})
        lines += ["", "## Probes: exported as `target_tf` exports them", "",
                  "`ok` ran and matched JAX; `not written`: JAX cannot serialize it at that TF's "
                  "StableHLO version; `err` / `mism` / `crash`: that TF fails, computes other "
                  "values, or crashes. `target_tf` refuses all but `ok` at export "
                  "(TargetTfError), for the probes tf_ops.tf_targets.FEATURES detects.", "",
                  "| probe | " + " | ".join(f"TF {v}" for v in versions) + " |",
                  "|---|" + "---|" * len(versions)]
        for probe in probes:
            cells = []
            for v in versions:
                if probe in report["probes_not_written"].get(v, {}):
                    cells.append("not written")
                else:
                    res = report["tf"][v]["results"].get(f"probe_{probe}", {}).get(PROBE_FORM, {})
                    cells.append(short.get(res.get("status"), "-"))
            lines.append(f"| {probe} | " + " | ".join(cells) + " |")
    if report["notes"]:
        lines += ["", "## Forms that could not be prepared", ""]
        lines += [f"- {k}: {v}" for k, v in sorted(report["notes"].items())]
    path.write_text("\n".join(lines) + "\n")


def write_targets(report: dict) -> None:
    TARGETS_JSON.parent.mkdir(parents=True, exist_ok=True)
    TARGETS_JSON.write_text(json.dumps(targets_table(report), indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS))
    parser.add_argument("--cache-dir", type=pathlib.Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "tf_version_matrix")
    parser.add_argument("--targets-only", action="store_true",
                        help=f"rewrite {TARGETS_JSON.name} from the committed matrix; run nothing")
    args = parser.parse_args(argv)
    if args.targets_only:
        write_targets(json.loads(MATRIX_JSON.read_text()))
        _log(f"wrote {TARGETS_JSON}")
        return 0

    import jax
    from tools.backcompat import storage

    args.cache_dir.mkdir(parents=True, exist_ok=True)
    runner = args.cache_dir / "runner.py"
    runner.write_text(RUNNER)
    artifacts = storage.read_all()
    report = {
        "generated": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "jax_version": jax.__version__,
        "artifacts": [a.name for a in artifacts],
        "artifact_calling_conventions": sorted({a.metadata["calling_convention_version"]
                                                for a in artifacts}),
        "expected_tf_failures": expected_tf_failures(),
        "tf": {}, "notes": {}, "probes_not_written": {},
    }
    for version in args.versions:
        python = ensure_venv(args.cache_dir, version)
        info = tf_info(python, runner)
        _log(f"TF {info['tf_version']}: StableHLO {info['stablehlo_current']}, calling "
             f"convention <= {info['max_calling_convention']}")
        payload = args.cache_dir / f"payload-{version}"
        notes = prepare_payload(payload, info)
        probe_payload = args.cache_dir / f"probes-{version}"
        if probe_payload.exists():
            shutil.rmtree(probe_payload)
        report["probes_not_written"][version] = prepare_probes(probe_payload, info)
        report["notes"].update({f"TF {version}: {k}": v for k, v in notes.items()})
        proc = subprocess.run([str(python), str(runner), "run", str(payload)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"runner failed in TF {version}:\n{proc.stderr[-3000:]}")
        report["tf"][version] = json.loads(proc.stdout.strip().splitlines()[-1])
        for probe in sorted(probe_payload.iterdir()) if probe_payload.exists() else ():
            report["tf"][version]["results"].update(run_probe(python, runner, probe))
        ok = sum(1 for r in report["tf"][version]["results"].values()
                 for f in r.values() if f["status"] == "ok")
        _log(f"TF {version}: {ok} artifact and probe forms ran and matched")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    MATRIX_JSON.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    write_targets(report)
    write_markdown(report, args.out.with_suffix(".md"))
    _log(f"wrote {MATRIX_JSON}, {TARGETS_JSON} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
