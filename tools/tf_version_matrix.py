"""Which TensorFlow versions run which back-compat artifacts: the data behind "oldest TF that can
run this" (used by the SavedModel `inspect` command).

Not part of the test run: it installs TensorFlow 2.17 ... 2.21 from PyPI, each in its own venv
under a cache directory, and runs every artifact of tests/backcompat/data in each through
`XlaCallModule` (eagerly), with a small runner that needs only TF and numpy. Each artifact is
tried in three forms:

  frozen      the module bytes exactly as JAX wrote them (calling convention of the artifact);
  for_tf      the same module with LAPACK custom calls rewritten to portable StableHLO
              (`jax2tf_native.lapack_rewrite`, as call_exported does), composites inlined, the
              feature rewrites that TF's probes call for applied (tf_targets.FEATURES: a probe
              that fails natively but runs rewritten, e.g. batched gathers in TF 2.17) and
              re-serialized at that TF's own StableHLO version (what jax2tf-native writes for a
              consumer TF with `target_tf=`);
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
A probe whose feature has a rewrite is also run rewritten (`<feature>_rewritten`); the probes
run first, so that the artifacts' target forms get the rewrites that TF needs.

`target_tf=` offers a TF when every TF-runnable artifact ran there in the target form, or
failed only because it holds a feature that TF fails even rewritten (then `target_tf` refuses
that feature at export, and the table lists the artifact under `refused`).

Writes saved_model_tools/data/tf_version_matrix.json (shipped; read by inspect),
tf_ops/data/tf_targets.json (shipped; the table behind `target_tf=`) and
tools/results/tf_version_matrix.md (tools/tf_version_matrix_report.py). `--targets-only` rewrites
tf_targets.json and the markdown from the committed matrix without running anything.
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
# Shared with `jax2tf-native verify --tf` (saved_model_tools.verify.tf_envs): one venv per TF version.
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
        # vmap of indexing: a gather and a scatter with batching dimensions.
        "batched_gather": (lambda v: jax.vmap(lambda r, j: r.at[j].set(r[(j + 1) % 4]))(
            v, jnp.argmax(v, axis=1)), x),
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
    from saved_model_tools.verify import tf_envs
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


def _retarget(module_bytes: bytes, stablehlo_version: str, rewrites=()) -> bytes:
    """The module as `target_tf` writes it for a TF: composites inlined, the `rewrites`
    (tf_targets.Feature) that TF needs applied, serialized at its StableHLO version."""
    import jax.interpreters.mlir as jax_mlir
    from jax.extend import mlir as jax_extend_mlir
    from tf_ops import module_for_tf
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(module_bytes)
        module_for_tf.inline_composites_as_calls(module)
        for feature in rewrites:
            feature.rewrite(module)
        return bytes(jax_extend_mlir.serialize_portable_artifact(module, stablehlo_version))


def features_of(module_bytes: bytes) -> list[str]:
    """The probes of the tf_targets.FEATURES that `module_bytes` holds."""
    import jax.interpreters.mlir as jax_mlir
    from jax.extend import mlir as jax_extend_mlir
    from tf_ops import module_for_tf, tf_targets
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(module_bytes)
        ops = list(module_for_tf._op_summaries(module))
        return sorted({f.probe for f in tf_targets.FEATURES
                       if any(f.matches(name, attrs, types, op)
                              for name, attrs, types, _, op in ops)})


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


def prepare_payload(payload: pathlib.Path, info: dict, rewrites=()) -> dict:
    """Writes every artifact in every form for one TF (described by `info`); the target forms
    get the feature `rewrites` that TF was measured to need (as `target_tf` applies them)."""
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
                                                   info["stablehlo_current"], rewrites),
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
                                                       info["stablehlo_current"], rewrites),
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
    `target_tf` does); returns {probe: error} for probes JAX cannot write for that TF. A probe
    of a tf_targets.Feature with a rewrite is also written rewritten, as its `rewritten_probe`."""
    import jax
    import numpy as np
    from jax2tf_native import linalg_portable
    from tf_ops import module_for_tf, tf_targets
    rewritten_probes = {f.probe: f for f in tf_targets.FEATURES if f.rewrite is not None}
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
        blobs = {name: blob}
        if name in rewritten_probes:
            feature = rewritten_probes[name]
            blobs[feature.rewritten_probe] = _retarget(blob, info["stablehlo_current"], [feature])
        meta = _form_meta(exported, stablehlo=info["stablehlo_current"], rtol=1e-5, atol=1e-5)
        for probe, probe_blob in blobs.items():
            # One payload per probe: each runs in its own process, since a probe may crash TF
            # (measured: dot_algorithm segfaults TF 2.18).
            directory = payload / probe / f"probe_{probe}"
            directory.mkdir(parents=True)
            np.savez(directory / "data.npz", in_0=x, out_0=np.asarray(jax.jit(fn)(x)))
            (directory / f"{PROBE_FORM}.bin").write_bytes(probe_blob)
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


def _probe_statuses(report: dict, version: str) -> dict[str, str]:
    entry = report["tf"][version]
    probes = {name[len("probe_"):]: r[PROBE_FORM]["status"] for name, r in
              entry["results"].items() if name.startswith("probe_")}
    probes.update({name: "cannot be written" for name in
                   report.get("probes_not_written", {}).get(version, {})})
    return dict(sorted(probes.items()))


def target_form(report: dict, version: str) -> str:
    """The form `target_tf=version` writes: re-exported at that TF's calling convention when
    it runs an older one than the artifacts use."""
    info = report["tf"][version]["info"]
    return ("for_tf_cc" if info["max_calling_convention"]
            < max(report["artifact_calling_conventions"]) else "for_tf")


def targets_table(report: dict) -> dict:
    """The `target_tf` table: each TF in which every TF-runnable artifact ran in the form
    `target_tf` writes (its calling convention, StableHLO version and feature rewrites), with
    the probes. An artifact that failed there is excused when it holds a feature
    (tf_targets.FEATURES) that the TF's probes fail even rewritten: `target_tf` refuses that
    feature at export (TargetTfError), so the TF stays a target and the artifact is listed
    under `refused`. Any other failure drops the TF from the table."""
    from tf_ops import tf_targets
    blocked = report["expected_tf_failures"]
    features = report.get("artifact_features", {})
    targets = {}
    for version, entry in report["tf"].items():
        info = entry["info"]
        form = target_form(report, version)
        probes = _probe_statuses(report, version)
        refused_features = {f.probe for f in tf_targets.measured_failures(probes.get)}
        runnable = [a for a in report["artifacts"] if a not in blocked]
        ran = [a for a in runnable
               if entry["results"].get(a, {}).get(form, {}).get("status") == "ok"]
        refused = {a: sorted(refused_features & set(features.get(a, ())))
                   for a in runnable if a not in ran}
        if not all(refused.values()):
            continue  # a failure no feature explains: not verified, `target_tf` must not offer it
        targets[version] = {
            "measured_release": info["tf_version"],
            "stablehlo_version": info["stablehlo_current"],
            "max_calling_convention": info["max_calling_convention"],
            "verified": f"{len(ran)}/{len(runnable)} artifacts ran as `{form}`"
                        + (f"; {len(refused)} other{' holds' if len(refused) == 1 else 's hold'}"
                           f" features target_tf refuses for this TF" if refused else ""),
            "refused": refused,
            "rewrites": [f.probe for f in tf_targets.measured_rewrites(probes.get)],
            "probes": probes,
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


def write_targets(report: dict) -> None:
    TARGETS_JSON.parent.mkdir(parents=True, exist_ok=True)
    TARGETS_JSON.write_text(json.dumps(targets_table(report), indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS))
    parser.add_argument("--cache-dir", type=pathlib.Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "tf_version_matrix")
    parser.add_argument("--targets-only", action="store_true",
                        help=f"rewrite {TARGETS_JSON.name} and the markdown from the committed "
                             f"matrix; run nothing")
    args = parser.parse_args(argv)
    if args.targets_only:
        from tools import tf_version_matrix_report
        report = json.loads(MATRIX_JSON.read_text())
        write_targets(report)
        tf_version_matrix_report.write_markdown(report, args.out.with_suffix(".md"))
        _log(f"wrote {TARGETS_JSON} and {args.out.with_suffix('.md')}")
        return 0

    import jax
    from jax2tf_native import lapack_rewrite
    from tools import tf_version_matrix_report
    from tools.backcompat import storage
    from tf_ops import tf_targets

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
        "artifact_features": {}, "lapack_rewritten": [],
        "tf": {}, "notes": {}, "probes_not_written": {},
    }
    for artifact in artifacts:  # what target_tf would refuse or rewrite, per artifact
        with jax.enable_x64(bool(artifact.metadata["requires_x64"])):
            rewritten = lapack_rewrite.rewrite_exported(jax.export.deserialize(
                artifact.serialized)).exported
        report["artifact_features"][artifact.name] = features_of(
            rewritten.mlir_module_serialized)
        if any(lapack_rewrite.routine_of(t) for t in artifact.custom_call_targets):
            report["lapack_rewritten"].append(artifact.name)
    for version in args.versions:
        python = ensure_venv(args.cache_dir, version)
        info = tf_info(python, runner)
        _log(f"TF {info['tf_version']}: StableHLO {info['stablehlo_current']}, calling "
             f"convention <= {info['max_calling_convention']}")
        # Probes first: the artifacts' target forms get the rewrites this TF's probes call for.
        probe_payload = args.cache_dir / f"probes-{version}"
        if probe_payload.exists():
            shutil.rmtree(probe_payload)
        report["probes_not_written"][version] = prepare_probes(probe_payload, info)
        probe_results = {}
        for probe in sorted(probe_payload.iterdir()) if probe_payload.exists() else ():
            probe_results.update(run_probe(python, runner, probe))
        report["tf"][version] = {"info": info, "results": probe_results}
        rewrites = tf_targets.measured_rewrites(_probe_statuses(report, version).get)
        _log(f"TF {version}: rewrites for the target forms: "
             f"{', '.join(f.probe for f in rewrites) or 'none'}")
        payload = args.cache_dir / f"payload-{version}"
        notes = prepare_payload(payload, info, rewrites)
        report["notes"].update({f"TF {version}: {k}": v for k, v in notes.items()})
        proc = subprocess.run([str(python), str(runner), "run", str(payload)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"runner failed in TF {version}:\n{proc.stderr[-3000:]}")
        ran = json.loads(proc.stdout.strip().splitlines()[-1])
        report["tf"][version] = {"info": ran["info"], "results": {**ran["results"],
                                                                 **probe_results}}
        ok = sum(1 for r in report["tf"][version]["results"].values()
                 for f in r.values() if f["status"] == "ok")
        _log(f"TF {version}: {ok} artifact and probe forms ran and matched")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    MATRIX_JSON.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    write_targets(report)
    tf_version_matrix_report.write_markdown(report, args.out.with_suffix(".md"))
    _log(f"wrote {MATRIX_JSON}, {TARGETS_JSON} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
