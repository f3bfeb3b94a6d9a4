"""Every frozen artifact in tests/backcompat/data still runs, in JAX and in TF through our call
path.

For each artifact:
  (a) JAX: `jax.export.deserialize(bytes).call(*inputs)` matches the frozen outputs;
  (b) TF, eagerly and in `tf.function(jit_compile=True)`, through `jax2tf_native.call_exported`:
      matches the frozen outputs when our allowlist says TF runs all its custom calls on CPU
      (after `call_exported` rewrote the lapack_*_ffi calls to portable StableHLO), and
      otherwise fails with an error that names the offending target (this is how the allowlist's
      "not runnable in TF" claims stay checked: annotate_device_placement is JAX-only by design).
Artifacts with inputs that violate their symbolic shapes must be rejected by both.

The coverage test fails when an allowlist target that our exports can emit on CPU has no
artifact; `python -m tools.backcompat generate --only NAME` writes a new one.
"""
from __future__ import annotations

import contextlib
import functools

import jax
import numpy as np
import pytest
import tensorflow as tf

from tests import matrix
from tools.backcompat import artifacts as artifact_specs
from tools.backcompat import storage
from tf_ops import custom_call_allowlist as allowlist
from tf_ops import custom_call_check

from jax2tf_native import call_exported, lapack_rewrite

ARTIFACTS = storage.read_all()
ARTIFACT_NAMES = [a.name for a in ARTIFACTS]

# Targets on the CPU side of the allowlist that our exports cannot put into a module we run, so
# no artifact can hold them. Each says why; the coverage test prints them.
NO_ARTIFACT_POSSIBLE = {
    "SPMDFullToShardShape": "needs a multi-device mesh; our call path runs single-device modules",
    "SPMDShardToFullShape": "needs a multi-device mesh; our call path runs single-device modules",
    "tf.call_tf_function": "written by jax2tf.call_tf(call_tf_graph=True); it calls a TF "
                           "function that lives in the process, not in a serialized artifact "
                           "(run through convert: tests/jax2tf_native/test_call_tf.py)",
}


@contextlib.contextmanager
def _jax_config(artifact: storage.Artifact):
    """The configuration the artifact was made under (x64 for float64/complex128 inputs)."""
    with jax.enable_x64(bool(artifact.metadata["requires_x64"])):
        yield


def _by_name(name: str) -> storage.Artifact:
    return ARTIFACTS[ARTIFACT_NAMES.index(name)]


def _tf_blockers(artifact: storage.Artifact) -> list[str]:
    """The artifact's targets that our allowlist says TF cannot run on CPU, except the LAPACK
    targets, which `call_exported` rewrites to portable StableHLO."""
    return [t for t in artifact.custom_call_targets
            if not (t in allowlist.ALLOWLIST_BY_TARGET
                    and allowlist.ALLOWLIST_BY_TARGET[t].runs_in_tf_on("cpu"))
            and lapack_rewrite.routine_of(t) is None]


def _rewritten(artifact: storage.Artifact) -> lapack_rewrite.RewriteResult:
    """The artifact after the LAPACK rewrite, which must rewrite every LAPACK call it has (every
    primitive behind one has a portable lowering, eig/schur/hessenberg/tridiagonal included).

    Cached by name: the eager and jit_compile runs of an artifact check the same rewrite (a
    failed one raises, and is not cached, in both)."""
    return _rewritten_by_name(artifact.name)


@functools.cache
def _rewritten_by_name(name: str) -> lapack_rewrite.RewriteResult:
    artifact = _by_name(name)
    with _jax_config(artifact):
        result = lapack_rewrite.rewrite_exported(jax.export.deserialize(artifact.serialized))
    assert result.failures == (), (
        f"{artifact.name}: LAPACK calls not rewritten: "
        + "; ".join(f"{f.target}: {f.reason[:200]}" for f in result.failures))
    return result


def _assert_outputs_match(artifact: storage.Artifact, actual, where: str) -> None:
    actual = [np.asarray(a) for a in actual]
    assert len(actual) == len(artifact.expected), (
        f"{artifact.name} in {where}: {len(actual)} outputs, expected {len(artifact.expected)}")
    for i, (got, want) in enumerate(zip(actual, artifact.expected)):
        assert got.dtype == want.dtype and got.shape == want.shape, (
            f"{artifact.name} in {where}, output {i}: got {got.dtype}{list(got.shape)}, "
            f"expected {want.dtype}{list(want.shape)}")
        if np.issubdtype(want.dtype, np.inexact):
            np.testing.assert_allclose(got, want, rtol=artifact.rtol, atol=artifact.atol,
                                       err_msg=f"{artifact.name} in {where}, output {i}")
        else:
            np.testing.assert_array_equal(got, want,
                                          err_msg=f"{artifact.name} in {where}, output {i}")


def test_artifacts_exist():
    expected = {spec.name for spec in artifact_specs.ARTIFACTS}
    missing = sorted(expected - set(ARTIFACT_NAMES))
    assert not missing, (f"artifacts {missing} are specified but not generated. Fix: python -m "
                         f"tools.backcompat generate --only {' --only '.join(missing)}")


@pytest.mark.parametrize("name", ARTIFACT_NAMES)
def test_metadata_matches_module(name):
    artifact = _by_name(name)
    exported = jax.export.deserialize(artifact.serialized)
    meta = artifact.metadata
    assert meta["calling_convention_version"] == exported.calling_convention_version
    assert tuple(meta["platforms"]) == tuple(exported.platforms)
    with jax.interpreters.mlir.make_ir_context():
        module = jax.extend.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        found = sorted({s.target for s in custom_call_check.find_custom_calls(module)})
    assert found == sorted(meta["custom_call_targets"])
    for key in ("jax_version", "jaxlib_version", "created", "tolerance"):
        assert meta[key], f"{name}: metadata.json lacks {key}"


@pytest.mark.parametrize("name", ARTIFACT_NAMES)
def test_runs_in_jax(name):
    artifact = _by_name(name)
    with _jax_config(artifact):
        exported = jax.export.deserialize(artifact.serialized)
        outputs = jax.tree.leaves(exported.call(*artifact.inputs))
    _assert_outputs_match(artifact, outputs, "JAX")


def _tf_params() -> list:
    """(name, jit_compile) for every artifact, eagerly and under jit_compile. CI runs every
    artifact eagerly and, of the LAPACK ones, only the Cholesky under jit_compile: the others'
    XLA compiles (SVD's alone is ~80 CPU-s) run in the full matrix (tests/matrix.py); the
    jit_compile run differs from the eager one by the tf.function around the same rewritten
    module, which the Cholesky one and tests/jax2tf_native/linalg_isolated check in CI."""
    return [matrix.in_ci(name, jit, id=f"{name}-{'jit_compile' if jit else 'eager'}",
                         ci=not jit or not name.startswith("cpu_lapack_")
                         or name == "cpu_lapack_cholesky")
            for name in ARTIFACT_NAMES for jit in (False, True)]


@pytest.mark.parametrize("name, jit_compile", _tf_params())
def test_runs_in_tf(name, jit_compile):
    artifact = _by_name(name)
    blockers = _tf_blockers(artifact)
    _rewritten(artifact)
    with _jax_config(artifact):
        def run():
            fn = call_exported(artifact.serialized)
            if jit_compile:
                fn = tf.function(fn, jit_compile=True, autograph=False)
            return tf.nest.flatten(fn(*[tf.constant(x) for x in artifact.inputs]))

        if not blockers:
            _assert_outputs_match(artifact, run(), f"TF (jit_compile={jit_compile})")
            return
        # Our allowlist says TF cannot run this artifact: the failure must name the target,
        # whether our check or TF's runtime reports it.
        with pytest.raises(Exception) as info:
            run()
    message = str(info.value)
    assert any(t in message for t in blockers), (
        f"{name}: expected an error naming one of {blockers}, got "
        f"{type(info.value).__name__}: {message[:500]}")


@pytest.mark.parametrize("name", [a.name for a in ARTIFACTS if a.bad_inputs is not None])
def test_bad_shapes_rejected(name):
    artifact = _by_name(name)
    with _jax_config(artifact):
        exported = jax.export.deserialize(artifact.serialized)
        with pytest.raises(Exception) as jax_error:
            jax.block_until_ready(exported.call(*artifact.bad_inputs))
        fn = call_exported(artifact.serialized)
        with pytest.raises(Exception) as tf_error:
            fn(*[tf.constant(x) for x in artifact.bad_inputs])
    for error in (jax_error, tf_error):
        # The message must say which dimension variable could not be solved/was violated.
        assert "b" in str(error.value) and len(str(error.value)) < 5000, str(error.value)[:2000]


def test_every_cpu_target_has_an_artifact():
    covered = {t for a in ARTIFACTS for t in a.custom_call_targets}
    emittable = {t.target for t in allowlist.targets_emittable_on("cpu")}
    missing = sorted(emittable - covered - set(NO_ARTIFACT_POSSIBLE))
    print("CPU targets without an artifact by design:",
          "; ".join(f"{t}: {why}" for t, why in NO_ARTIFACT_POSSIBLE.items()))
    assert not missing, (
        f"allowlist targets emittable on CPU with no artifact: {missing}. Fix: add an "
        f"ArtifactSpec in tools/backcompat/artifacts.py that emits them, then run "
        f"`python -m tools.backcompat generate --only NAME`.")
    stale = sorted(set(NO_ARTIFACT_POSSIBLE) - emittable)
    assert not stale, f"NO_ARTIFACT_POSSIBLE names targets not emittable on CPU: {stale}"


@pytest.mark.parametrize("name", ARTIFACT_NAMES)
def test_check_agrees_with_tf(name):
    """Our export-time check accepts an artifact exactly when TF runs it (test_runs_in_tf)."""
    artifact = _by_name(name)
    exported = _rewritten(artifact).exported
    with jax.interpreters.mlir.make_ir_context():
        module = jax.extend.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        if _tf_blockers(artifact):
            with pytest.raises(custom_call_check.CustomCallNotAllowedError):
                custom_call_check.check_custom_calls(module, platforms=exported.platforms)
        else:
            custom_call_check.check_custom_calls(module, platforms=exported.platforms)
