"""`target_tf="2.19"`: modules written for an older TF (calling convention, StableHLO version),
from the table tools/tf_version_matrix.py measures, and clear export-time errors for what that
TF cannot run. Runs in the installed TF (2.21), which runs every older target's modules too;
tests/saved_model_tools/test_target_tf_serving.py runs them in TF 2.19 itself."""
import json
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native.errors import TargetTfError
from tf_ops import tf_targets, versions

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import tf_version_matrix  # noqa: E402


def gelu_solve(x):
    h = 0.5 * x * (1 + jax.lax.erf(x / np.float32(np.sqrt(2))))
    a = h.T @ h + 4 * jnp.eye(x.shape[1], dtype=x.dtype)
    return jnp.linalg.solve(a, h.T).T


def _call_module_ops(concrete):
    return [op for op in concrete.graph.get_operations() if op.type == "XlaCallModule"]


def _x(batch=5):
    return np.random.default_rng(0).standard_normal((batch, 3)).astype(np.float32)


def test_table_is_the_measured_matrix():
    matrix = json.loads(tf_version_matrix.MATRIX_JSON.read_text())
    table = json.loads(tf_targets.TARGETS_FILE.read_text())
    assert table == json.loads(json.dumps(tf_version_matrix.targets_table(matrix)))
    for version, target in tf_targets.measured_targets().items():
        info = matrix["tf"][version]["info"]
        assert target.stablehlo_version == info["stablehlo_current"]
        assert target.max_calling_convention == info["max_calling_convention"]
        assert target.measured_release == info["tf_version"]
    assert list(tf_targets.measured_targets()) == ["2.17", "2.18", "2.19", "2.20", "2.21"]


@pytest.mark.parametrize("target_tf", ["2.17", "2.19", "2.21"])
def test_convert_writes_the_targets_calling_convention_and_stablehlo(target_tf):
    target = tf_targets.resolve(target_tf)
    f_tf = jax2tf_native.convert(gelu_solve, polymorphic_shapes=["(b, 3)"], target_tf=target_tf)
    np.testing.assert_allclose(f_tf(_x()).numpy(), gelu_solve(_x()), rtol=1e-5, atol=1e-6)
    spec = jax2tf_native.input_signature([_x(1)], ["(b, 3)"])
    concrete = tf.function(f_tf, input_signature=spec, autograph=False).get_concrete_function()
    ops = _call_module_ops(concrete)
    assert ops
    for op in ops:
        want_cc = min(target.max_calling_convention,
                      jax.config.jax_export_calling_convention_version)
        assert op.get_attr("version") == want_cc
        assert f"StableHLO_v{target.stablehlo_version}".encode() in op.get_attr("module")
    np.testing.assert_allclose(concrete(tf.constant(_x(7))).numpy(), gelu_solve(_x(7)),
                               rtol=1e-5, atol=1e-6)


def test_default_target_is_the_installed_tf():
    f_tf = jax2tf_native.convert(jnp.sin)
    concrete = tf.function(f_tf, autograph=False).get_concrete_function(
        tf.TensorSpec([3], tf.float32))
    op, = _call_module_ops(concrete)
    assert op.get_attr("version") == min(versions.tf_maximum_calling_convention_version(),
                                          jax.config.jax_export_calling_convention_version)
    assert f"StableHLO_v{versions.tf_stablehlo_version()}".encode() in op.get_attr("module")


def test_gradients_of_a_target_tf_function_equal_jax():
    f_tf = jax2tf_native.convert(lambda x: jnp.sum(gelu_solve(x)), target_tf="2.19")
    x = tf.constant(_x())
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f_tf(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(),
                               jax.grad(lambda v: jnp.sum(gelu_solve(v)))(_x()),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad, error, match", [
    ("2.16", ValueError, "supported: 2.17, 2.18, 2.19, 2.20, 2.21"),
    ("latest", ValueError, "not a TensorFlow version we measured"),
    (2.19, TypeError, "must be a string such as '2.19'"),
])
def test_bad_target_tf_names_the_supported_versions(bad, error, match):
    with pytest.raises(error, match=match):
        jax2tf_native.convert(jnp.sin, target_tf=bad)


def test_patch_release_is_accepted():
    assert tf_targets.resolve("2.19.1") == tf_targets.resolve("2.19")


def test_expert_stablehlo_version_must_be_readable_by_the_target():
    with pytest.raises(ValueError, match=r"newer than TF 2.19 reads \(1.9.1\)"):
        jax2tf_native.convert(jnp.sin, target_tf="2.19", stablehlo_version="1.13.7")
    f_tf = jax2tf_native.convert(jnp.sin, target_tf="2.19", stablehlo_version="1.7.3")
    concrete = tf.function(f_tf, autograph=False).get_concrete_function(
        tf.TensorSpec([3], tf.float32))
    op, = _call_module_ops(concrete)
    assert b"StableHLO_v1.7.3" in op.get_attr("module")


def _float8_e4m3(x):
    return x.astype(jnp.float8_e4m3).astype(jnp.float32)


def _dot_algorithm(x):
    return jax.lax.dot(x, x.T, precision=jax.lax.DotAlgorithmPreset.F32_F32_F32)


def _exp_accuracy(x):
    return jax.lax.exp(x, accuracy=jax.lax.Tolerance(atol=1e-5, rtol=1e-5, ulps=2))


FEATURE_CASES = [("float8_e4m3", _float8_e4m3, "f8E4M3"),
                 ("dot_algorithm", _dot_algorithm, "dot algorithm"),
                 ("exp_accuracy", _exp_accuracy, "result_accuracy")]


@pytest.mark.parametrize("probe, fn, named", FEATURE_CASES)
def test_what_a_target_cannot_run_fails_at_export(probe, fn, named):
    """For every measured TF that did not run the probe, the export fails naming the op, the
    target and the oldest TF that runs it; where it ran, the export succeeds and equals JAX."""
    oldest = tf_targets.oldest_running(probe)
    for version, target in tf_targets.measured_targets().items():
        f_tf = jax2tf_native.convert(fn, target_tf=version)
        if tf_targets.probe_status(target, probe) == "ok":
            np.testing.assert_allclose(f_tf(_x()).numpy(), jax.jit(fn)(_x()), rtol=1e-6)
            continue
        with pytest.raises(TargetTfError) as info:
            f_tf(_x())
        message = str(info.value)
        assert named in message and f"TF {version}" in message, message
        assert f"target_tf='{oldest}'" in message, message
        assert "test_target_tf.py" in message, message  # the user's source line


def test_measured_table_has_failing_probes():
    """The feature checks above are not vacuous: the table records older TFs failing them."""
    statuses = {probe: [tf_targets.probe_status(t, probe)
                        for t in tf_targets.measured_targets().values()]
                for probe, _, _ in FEATURE_CASES}
    for probe, seen in statuses.items():
        assert None not in seen, (probe, seen)
        assert any(s != "ok" for s in seen) and seen[-1] == "ok", (probe, seen)


def _export_portable(fn, *specs):
    """jax.export with our portable linear algebra (JAX's own CPU lowering calls LAPACK)."""
    from jax2tf_native import linalg_portable
    with linalg_portable.export_scope(platforms=("cpu",)) as kwargs:
        return jax.export.export(jax.jit(fn), **kwargs)(*specs)


def erf_gelu(x):
    return 0.5 * x * (1 + jax.lax.erf(x / np.float32(np.sqrt(2))))


def test_call_exported_wraps_a_newer_calling_convention_for_the_target():
    # erf-GELU alone: the VJP that serialize(vjp_order=1) exports uses JAX's own (LAPACK)
    # linear algebra, which TF cannot run whatever the target.
    exported = jax.export.export(jax.jit(erf_gelu))(
        jax.ShapeDtypeStruct((jax.export.symbolic_shape("b")[0], 3), jnp.float32))
    assert exported.calling_convention_version > tf_targets.resolve("2.19").max_calling_convention
    blob = exported.serialize(vjp_order=1)
    f_tf = jax2tf_native.call_exported(blob, target_tf="2.19")
    assert f_tf.exported.calling_convention_version == 9
    x = tf.constant(_x())
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f_tf(x)
        loss = tf.reduce_sum(y)
    np.testing.assert_allclose(y.numpy(), erf_gelu(_x()), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               jax.grad(lambda v: jnp.sum(erf_gelu(v)))(_x()),
                               rtol=1e-5, atol=1e-6)
    concrete = tf.function(f_tf, autograph=False).get_concrete_function(
        tf.TensorSpec([None, 3], tf.float32))
    for op in _call_module_ops(concrete):
        assert op.get_attr("version") == 9
        assert b"StableHLO_v1.9.1" in op.get_attr("module")


def test_call_exported_target_runs_portable_linear_algebra():
    exported = _export_portable(
        gelu_solve, jax.ShapeDtypeStruct((jax.export.symbolic_shape("b")[0], 3), jnp.float32))
    f_tf = jax2tf_native.call_exported(exported, target_tf="2.18", with_gradient=False)
    assert f_tf.exported.calling_convention_version == 9
    np.testing.assert_allclose(f_tf(_x()).numpy(), gelu_solve(_x()), rtol=1e-5, atol=1e-6)


def test_call_exported_refuses_what_the_target_cannot_run():
    blob = jax.export.export(jax.jit(_float8_e4m3))(
        jax.ShapeDtypeStruct((2, 3), jnp.float32)).serialize()
    with pytest.raises(TargetTfError, match=r"f8E4M3.*TF 2.17"):
        jax2tf_native.call_exported(blob, target_tf="2.17")


def test_calling_convention_error_names_the_fix():
    target = tf_targets.resolve("2.19")
    with pytest.raises(TargetTfError) as info:
        target.check_calling_convention(10, "'model'")
    message = str(info.value)
    assert re.search(r"calling convention 10, but TF 2.19 runs versions up to 9", message)
    assert "target_tf='2.19'" in message and "TF 2.20 or newer" in message


def test_save_records_the_target_and_refuses_what_it_cannot_run(tmp_path):
    import saved_model_tools
    from saved_model_tools import manifest
    x = _x(2)
    record = saved_model_tools.save(tmp_path / "m", lambda p, v: gelu_solve(v) * p["s"],
                                    {"s": np.float32(2)}, [x], polymorphic_shapes=["(b, 3)"],
                                    target_tf="2.18")
    assert (record.target_tf, record.stablehlo_version) == ("2.18", "1.7.3")
    assert manifest.read(tmp_path / "m") == record
    default = saved_model_tools.save(tmp_path / "d", lambda p, v: v * p, np.float32(2), [x])
    assert default.target_tf == tf_targets.installed_version()
    assert default.stablehlo_version == versions.tf_stablehlo_version()
    with pytest.raises(TargetTfError, match=r"f8E4M3.*TF 2.17"):
        saved_model_tools.save(tmp_path / "f8", lambda p, v: _float8_e4m3(v) * p,
                               np.float32(1), [x], target_tf="2.17")
    assert not (tmp_path / "f8").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "m"]  # nothing else written


def test_export_command_takes_target_tf(tmp_path, monkeypatch):
    from saved_model_tools import cli
    from saved_model_tools import inspect as inspect_lib, manifest
    (tmp_path / "user_gelu.py").write_text(
        "import jax\n\ndef predict(params, x):\n    return jax.nn.gelu(x, approximate=False)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["export", "user_gelu:predict", "--input", "x:float32[b,3]",
                     "--out", "out/1", "--target-tf", "2.19"])
    sys.modules.pop("user_gelu", None)
    assert code == 0
    assert manifest.read(tmp_path / "out/1").target_tf == "2.19"
    report = inspect_lib.inspect_saved_model(str(tmp_path / "out/1"))
    assert {m.calling_convention_version for m in report.modules} == {9}
    assert {m.stablehlo_version for m in report.modules} == {"1.9.1"}
    assert report.tf_support.oldest_tf == "2.19"  # 2.18 reads StableHLO up to 1.7.3 only
    assert "written for TF 2.19 (target_tf; StableHLO 1.9.1)" in report.format()


def test_verify_tf_rejects_a_malformed_version(tmp_path, capsys):
    from saved_model_tools import cli
    code = cli.main(["verify", str(tmp_path), "--tf", "two"])
    assert code == 2
    assert "--tf expects a TensorFlow major.minor version such as 2.19" in capsys.readouterr().err


def test_tf_env_is_reused_once_built(tmp_path, monkeypatch):
    from saved_model_tools.verify import tf_envs
    monkeypatch.setenv("JAX2TF_NATIVE_TF_ENVS", str(tmp_path))
    assert tf_envs.cache_dir() == tmp_path
    venv = tmp_path / "tf-2.19"
    (venv / "bin").mkdir(parents=True)
    assert not tf_envs.is_ready("2.19")
    (venv / ".installed").write_text("tensorflow 2.19.1\n")
    lines = []
    assert tf_envs.ensure_tf_env("2.19", progress=lines.append) == venv / "bin" / "python"
    assert lines == []  # nothing built, nothing printed
    for bad in ("2", "two", "3.1", 2.19):
        with pytest.raises(ValueError, match="major.minor version such as 2.19"):
            tf_envs.check_version(bad)
