"""LAPACK custom calls in existing CPU artifacts run in TF (jax2tf_native.lapack_rewrite).

The artifacts are JAX's own back-compat data (modules written by JAX 2024-2025 with the inputs
and outputs JAX recorded), run through `call_exported` in TF eagerly (and under
`jit_compile=True` for one real and one complex dtype of each), checked as JAX's
tests/export_back_compat_test.py checks them: the same tolerances, and properties where the result is not unique (eigenvectors, SVD, Schur, LU).
"""
from __future__ import annotations

import importlib
import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax import lax

import jax2tf_native
from jax2tf_native import _jax_internals, lapack_rewrite
from tf_ops import custom_call_allowlist, versions
from tf_ops.custom_call_check import CustomCallNotAllowedError

from tests import matrix

_DATA = "jax._src.internal_test_util.export_back_compat_test_data."
_FILES = ("cpu_cholesky_lapack_potrf", "cpu_eig_lapack_geev", "cpu_eigh_lapack_syev",
          "cpu_hessenberg_lapack_gehrd", "cpu_lu_lapack_getrf", "cpu_qr_lapack_geqrf",
          "cpu_schur_lapack_gees", "cpu_svd_lapack_gesdd", "cpu_triangular_solve_blas_trsm",
          "cpu_tridiagonal_lapack_sytrd_hetrd", "cpu_tridiagonal_solve_lapack_gtsv")
_DTYPES = ("f32", "f64", "c64", "c128")
# JAX's tolerances in export_back_compat_test.py, the same for every CPU LAPACK test.
_RTOL = dict(f32=1e-3, f64=1e-5, c64=1e-3, c128=1e-5)
_ATOL = dict(f32=1e-4, f64=1e-12, c64=1e-4, c128=1e-12)
_EPS = dict(f32=np.finfo(np.float32).eps, f64=np.finfo(np.float64).eps,
            c64=np.finfo(np.float32).eps, c128=np.finfo(np.float64).eps)


def _entry(file: str, dtype: str) -> dict:
    module = importlib.import_module(_DATA + file)
    (data,) = [v for k, v in vars(module).items() if k.startswith("data_")]
    return data[dtype]


def _artifact(entry: dict) -> jax.export.Exported:
    """The `Exported` JAX's back-compat test builds from a data entry (run_serialized)."""
    inputs, outputs = tuple(entry["inputs"]), tuple(entry["expected_outputs"])
    in_avals = tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in inputs)
    out_avals = tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in outputs)
    n_in, n_out = len(in_avals), len(out_avals)
    # Exported's constructor takes these underscore fields; JAX's own test helper passes them.
    return jax.export.Exported(
        fun_name="backcompat", in_tree=jax.tree.structure((inputs, {})), in_avals=in_avals,
        out_tree=jax.tree.structure(outputs), out_avals=out_avals,
        _has_named_shardings=True, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out, nr_devices=1, platforms=("cpu",),
        ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
        mlir_module_serialized=entry["mlir_module_serialized"],
        calling_convention_version=entry["xla_call_module_version"],
        module_kept_var_idx=tuple(range(n_in)), uses_global_constants=False, _get_vjp=None)


def _close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=_RTOL[dtype],
                               atol=_ATOL[dtype])


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _check_equal_outputs(inputs, got, want, dtype):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _close(g, w, dtype)


def _check_lu(inputs, got, want, dtype):
    lu, pivots, perm = (np.asarray(x) for x in got)
    np.testing.assert_array_equal(pivots, want[1])  # pivots are unique here: check them exactly
    np.testing.assert_array_equal(perm, want[2])
    n = lu.shape[-1]
    operand = np.arange(n * n, dtype=lu.dtype).reshape(n, n)  # JAX's lu_harness input
    l, u = np.tril(lu, -1) + np.eye(n, dtype=lu.dtype), np.triu(lu)
    _close(operand[perm], l @ u, dtype)


def _check_eigh(inputs, got, want, dtype):
    v, w = (np.asarray(x) for x in got)
    n = v.shape[-1]
    operand = np.arange(n * n, dtype=v.dtype).reshape(n, n)  # JAX's eigh_input
    operand = (operand + _mH(operand)) / 2
    rtol = _RTOL[dtype]
    assert np.linalg.norm(np.eye(n) - _mH(v) @ v) <= rtol
    assert np.linalg.norm(operand @ v - w[None, :].astype(v.dtype) * v) <= (
        rtol * np.linalg.norm(operand))
    _close(w, want[1], dtype)


def _check_eig(inputs, got, want, dtype):
    w, vl, vr = (np.asarray(x) for x in got)
    n = w.shape[-1]
    operand = np.arange(n * n).reshape(n, n).astype(vr.dtype)
    norm = lambda x: np.linalg.norm(x) / ((n + 1) * _EPS[dtype])
    assert norm(operand @ vr - w[None, :] * vr) < 100
    assert norm(_mH(operand) @ vl - np.conj(w)[None, :] * vl) < 100
    for a, b in ((w, want[0]), (want[0], w)):
        for value in a:
            _close(np.min(np.abs(b - value)), 0.0, dtype)


def _check_schur(inputs, got, want, dtype):
    t, s = (np.asarray(x) for x in got)
    _close(inputs[0], s @ t @ _mH(s), dtype)


def _check_svd(inputs, got, want, dtype):
    u, s, vh = (np.asarray(x) for x in got)
    a = np.asarray(inputs[0])
    tol = 80 * _EPS[dtype]
    rebuilt = (s[..., None, :] * u) @ vh
    error = np.linalg.norm(a - rebuilt, axis=(-2, -1)) / np.linalg.norm(a, axis=(-2, -1))
    assert np.max(error) < 2 * tol
    for q in (u, vh):
        eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape)
        np.testing.assert_allclose(np.real(_mH(q) @ q), eye, rtol=tol, atol=tol)


def _check_trsm(inputs, got, want, dtype):
    a, b = (np.asarray(x) for x in inputs)
    (x,) = (np.asarray(v) for v in got)
    _close(a @ x, b, dtype)


_CHECKS = {
    "cpu_cholesky_lapack_potrf": _check_equal_outputs, "cpu_eig_lapack_geev": _check_eig,
    "cpu_eigh_lapack_syev": _check_eigh, "cpu_hessenberg_lapack_gehrd": _check_equal_outputs,
    "cpu_lu_lapack_getrf": _check_lu, "cpu_qr_lapack_geqrf": _check_equal_outputs,
    "cpu_schur_lapack_gees": _check_schur, "cpu_svd_lapack_gesdd": _check_svd,
    "cpu_triangular_solve_blas_trsm": _check_trsm,
    "cpu_tridiagonal_lapack_sytrd_hetrd": _check_equal_outputs,
    "cpu_tridiagonal_solve_lapack_gtsv": _check_equal_outputs,
}


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):  # float64 entries: their inputs and outputs keep 64 bits
        yield


def _flat(outs):
    return [np.asarray(o) for o in jax.tree.leaves(outs)]


# Every entry runs eagerly; under jit_compile=True, float32 and complex128 of each file (one
# real and one complex dtype, one of each precision): the second XLA compile of a rewritten
# module costs as much as the first (the suite's largest CPU cost), and the jit_compile path
# differs from the eager one by the tf.function around the same op, not by dtype.
_JIT_COMPILE_DTYPES = ("f32", "c128")
# The full matrix runs all 44 entries (tests/matrix.py); CI one per file, float32 and complex128
# in turn along _FILES: each target once, eagerly and under jit_compile.
_CI_DTYPE = {file: _JIT_COMPILE_DTYPES[i % 2] for i, file in enumerate(_FILES)}


@pytest.mark.parametrize("file,dtype", [
    matrix.in_ci(f, d, id=f"{f}-{d}", ci=d == _CI_DTYPE[f])
    for f, d in itertools.product(_FILES, _DTYPES)])
def test_jax_backcompat_entry_runs_in_tf(file, dtype):
    entry = _entry(file, dtype)
    artifact = _artifact(entry)
    rewrite = lapack_rewrite.rewrite_exported(artifact)
    assert rewrite.failures == ()
    assert set(rewrite.rewritten_targets) == set(entry["custom_call_targets"])
    assert "custom_call @lapack_" not in rewrite.exported.mlir_module()
    fn = jax2tf_native.call_exported(rewrite.exported, with_gradient=False)
    assert fn.lapack_rewritten == ()  # already rewritten: nothing left to do
    inputs = [tf.constant(x) for x in entry["inputs"]]
    runs = [_flat(fn(*inputs))]
    if dtype in _JIT_COMPILE_DTYPES:
        runs.append(_flat(tf.function(fn, jit_compile=True)(*inputs)))
    want = list(entry["expected_outputs"])
    for got in runs:
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert [g.shape for g in got] == [w.shape for w in want]
        _CHECKS[file](entry["inputs"], got, want, dtype)


# JAX's CPU entries without LAPACK: modules whose `main` has dynamic dimensions, recorded with
# static inputs (JAX's back-compat test calls them with those static avals); call_exported
# refines them to the declared shapes (jax2tf_native.declared_shapes), as XlaCallModule would.
_DYNAMIC_ENTRIES = (("stablehlo_dynamic_top_k", "data_2023_07_16"),
                    ("stablehlo_dynamic_top_k", "data_2023_08_11"),
                    ("stablehlo_dynamic_approx_top_k", "data_2024_05_30"),
                    ("stablehlo_dynamic_rng_bit_generator", "data_2023_06_17"))


@pytest.mark.parametrize("file,name", _DYNAMIC_ENTRIES)
def test_jax_backcompat_dynamic_entry_runs_in_tf(file, name):
    entry = getattr(importlib.import_module(_DATA + file), name)
    artifact = _artifact(entry)
    def main_dynamic_types(exported):
        line = next(l for l in exported.mlir_module().splitlines() if "func public @main" in l)
        return re.findall(r"tensor<[^>]*\?[^>]*>", line)

    assert main_dynamic_types(artifact)
    fn = jax2tf_native.call_exported(artifact, with_gradient=False)
    assert main_dynamic_types(fn.exported) == []  # refined to the declared static shapes
    inputs = [tf.constant(x) for x in entry["inputs"]]
    want = list(entry["expected_outputs"])
    for got in (_flat(fn(*inputs)), _flat(tf.function(fn, jit_compile=True)(*inputs))):
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):  # JAX's own check of these entries: equal outputs
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _cpu_entries() -> list[tuple[str, str]]:
    """(file, entry) of every CPU entry in JAX's shipped back-compat data."""
    import pkgutil
    package = importlib.import_module(_DATA.rstrip("."))
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.ispkg:
            continue
        module = importlib.import_module(_DATA + info.name)
        for key, value in vars(module).items():
            if not key.startswith("data_") or not isinstance(value, dict):
                continue
            entries = ([(key, value)] if "platform" in value else
                       [(f"{key}[{k}]", v) for k, v in value.items() if isinstance(v, dict)])
            found += [(info.name, n) for n, e in entries if e.get("platform") == "cpu"]
    return sorted(found)


def test_every_cpu_entry_of_jax_backcompat_data_runs_here():
    """The two parametrized tests above cover all 48 CPU entries JAX 0.10.2 ships."""
    entries = _cpu_entries()
    ours = sorted([(f, n) for f, n in _DYNAMIC_ENTRIES]
                  + [(f, next(k for k in vars(importlib.import_module(_DATA + f))
                              if k.startswith("data_")) + f"[{d}]")
                     for f, d in itertools.product(_FILES, _DTYPES)])
    assert len(entries) == 48, entries
    assert entries == ours


def _native_artifact(fun, *specs) -> jax.export.Exported:
    """`fun` exported the way a JAX user does: plain jax.export, JAX's CPU (LAPACK) lowering."""
    return jax.export.export(jax.jit(fun), platforms=("cpu",))(*specs)


def _two_lus_and_a_cholesky(a):
    lu1, pivots1, _ = lax.linalg.lu(a)
    lu2, pivots2, _ = lax.linalg.lu(2 * a + 1)
    spd = a @ jnp.swapaxes(a, -1, -2) + 4 * jnp.eye(a.shape[-1], dtype=a.dtype)
    return lu1, pivots1, lu2, pivots2, jnp.linalg.cholesky(spd)


def test_symbolic_batch_and_repeated_calls_run_in_tf():
    b, = jax.export.symbolic_shape("b")
    artifact = _native_artifact(_two_lus_and_a_cholesky,
                                jax.ShapeDtypeStruct((b, 4, 4), np.float32))
    text = artifact.mlir_module()
    assert text.count("lapack_sgetrf_ffi") >= 2 and "tensor<?x4x4xf32>" in text
    fn = jax2tf_native.call_exported(artifact.serialize())
    assert fn.lapack_rewritten == ("lapack_sgetrf_ffi", "lapack_spotrf_ffi")
    compiled = tf.function(fn, jit_compile=True, input_signature=[
        tf.TensorSpec([None, 4, 4], tf.float32)])
    for batch in (1, 3):
        a = np.random.default_rng(batch).normal(size=(batch, 4, 4)).astype(np.float32)
        want = _flat(artifact.call(a))  # JAX itself, running LAPACK
        for got in (_flat(fn(tf.constant(a))), _flat(compiled(tf.constant(a)))):
            assert len(got) == len(want) == 5
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_module_without_lapack_is_left_byte_identical():
    artifact = _native_artifact(jnp.sin, jax.ShapeDtypeStruct((3,), np.float32))
    rewrite = lapack_rewrite.rewrite_exported(artifact)
    assert rewrite.exported is artifact and rewrite.rewritten_targets == ()
    fn = jax2tf_native.call_exported(artifact)
    assert fn.exported.mlir_module_serialized == artifact.mlir_module_serialized


def test_rewrite_lapack_false_keeps_todays_error():
    artifact = _native_artifact(lambda a: lax.linalg.lu(a)[0],
                                jax.ShapeDtypeStruct((3, 3), np.float32))
    assert lapack_rewrite.rewrite_exported(artifact, enabled=False).exported is artifact
    with pytest.raises(CustomCallNotAllowedError, match="lapack_sgetrf_ffi"):
        jax2tf_native.call_exported(artifact, rewrite_lapack=False)


def test_call_we_cannot_rewrite_fails_naming_target_line_and_reason():
    # gesdd with LAPACK's job 'O' (overwrite A with U): JAX never emits it, no adapter has it.
    artifact = _native_artifact(lambda a: lax.linalg.svd(a, full_matrices=True),
                                jax.ShapeDtypeStruct((4, 4), np.float32))
    text = artifact.mlir_module()
    assert "mode = 65 : ui8" in text
    with jax.interpreters.mlir.make_ir_context():
        module = jax.extend.mlir.ir.Module.parse(text.replace("mode = 65 : ui8",
                                                              "mode = 79 : ui8"))
        blob = jax.extend.mlir.serialize_portable_artifact(
            module, versions.tf_stablehlo_version())
    odd = _jax_internals.exported_with_module(artifact, bytes(blob), lambda v: v)
    with pytest.raises(CustomCallNotAllowedError) as info:
        jax2tf_native.call_exported(odd)
    message = str(info.value)
    assert "'lapack_sgesdd_ffi'" in message and "lapack_rewrite_checks.py:" in message
    assert "not rewritten to portable StableHLO: NotRewritableError: gesdd mode 'O'" in message
    assert message.splitlines()[-1].startswith("Fix:")


def test_vjp_chain_is_rewritten_too():
    def f(a):
        spd = a @ a.T + 4 * jnp.eye(3, dtype=a.dtype)
        return jnp.sum(jnp.linalg.cholesky(spd))

    artifact = _native_artifact(f, jax.ShapeDtypeStruct((3, 3), np.float32))
    fn = jax2tf_native.call_exported(artifact.serialize(vjp_order=1))
    a = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    x = tf.Variable(a)
    with tf.GradientTape() as tape:
        y = fn(x)
    np.testing.assert_allclose(np.asarray(y), f(a), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(tape.gradient(y, x)), jax.grad(f)(a), rtol=1e-4,
                               atol=1e-5)


def test_allowlist_says_every_lapack_target_is_rewritten():
    lapack = {t.target for t in custom_call_allowlist.ALLOWLIST if t.target.startswith("lapack_")}
    assert lapack == set(lapack_rewrite.all_targets()) and len(lapack) == 48
    for target in lapack:
        assert "rewritten to portable StableHLO" in custom_call_allowlist.ALLOWLIST_BY_TARGET[
            target].note
        assert lapack_rewrite.routine_of(target) is not None


def test_save_exported_runs_lapack_artifact_and_inspect_lists_it(tmp_path):
    import saved_model_tools
    from saved_model_tools import inspect as inspect_lib

    def solve(a, b):
        return jnp.linalg.solve(a, b)  # getrf on CPU, then triangular solves

    batch, = jax.export.symbolic_shape("b")
    artifact = _native_artifact(solve, jax.ShapeDtypeStruct((batch, 3, 3), np.float32),
                                jax.ShapeDtypeStruct((batch, 3, 2), np.float32))
    assert "lapack_sgetrf_ffi" in artifact.mlir_module()
    saved_model_tools.save_exported(tmp_path / "m", artifact.serialize(), with_gradient=False)
    report = inspect_lib.inspect_saved_model(tmp_path / "m")
    rewritten = {t for module in report.modules for t in module.rewritten_lapack}
    assert "lapack_sgetrf_ffi" in rewritten
    assert not any(c.target.startswith("lapack_") for module in report.modules
                   for c in module.custom_calls)
    assert "LAPACK calls rewritten to portable StableHLO: " in report.format()
    served = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32)
    b = rng.normal(size=(2, 3, 2)).astype(np.float32)
    (got,) = served(input_0=tf.constant(a), input_1=tf.constant(b)).values()
    np.testing.assert_allclose(np.asarray(got), artifact.call(a, b), rtol=1e-4, atol=1e-5)


def _options(a, b, c):
    """LAPACK options JAX's back-compat data does not cover: upper triangles, right side,
    transposes, unit diagonals, job 'N' of gesdd (full and reduced), batched operands."""
    spd = a @ _mT(a) + 4 * jnp.eye(4, dtype=a.dtype)
    w_upper, v_upper = jnp.linalg.eigh(jnp.triu(spd), UPLO="U", symmetrize_input=False)
    outs = [w_upper, (v_upper * w_upper[..., None, :]) @ _mT(v_upper),
            lax.linalg.svd(a, full_matrices=True, compute_uv=False),
            lax.linalg.svd(b, full_matrices=False, compute_uv=False)]
    # Each option takes both values in one of these (left, lower, transpose, conjugate, unit).
    for left, lower, transpose, conjugate, unit in (
            (True, True, False, False, False), (False, False, True, False, True),
            (True, False, True, True, False), (False, True, True, True, True)):
        outs.append(lax.linalg.triangular_solve(
            c + 4 * jnp.eye(4, dtype=c.dtype), b if left else _mT(b), left_side=left,
            lower=lower, transpose_a=transpose, conjugate_a=conjugate, unit_diagonal=unit))
    return outs


def _mT(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


@pytest.mark.parametrize("dtype", [np.complex64])
def test_lapack_options_match_jax(dtype):
    rng = np.random.default_rng(0)

    def make(*shape):
        x = rng.normal(size=shape)
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.normal(size=shape)
        return x.astype(dtype)

    args = (make(2, 4, 4), make(2, 4, 3), make(2, 4, 4))
    artifact = _native_artifact(_options, *[jax.ShapeDtypeStruct(x.shape, dtype) for x in args])
    fn = jax2tf_native.call_exported(artifact)
    assert {"syevd", "gesdd", "trsm"} <= {lapack_rewrite.routine_of(t)
                                          for t in fn.lapack_rewritten}
    want = _flat(artifact.call(*args))  # JAX's LAPACK
    for got in (_flat(fn(*args)), _flat(tf.function(fn, jit_compile=True)(*args))):
        assert len(got) == len(want) == 8
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)


def test_symbolic_matrix_size_runs_in_tf():
    n, = jax.export.symbolic_shape("n")
    artifact = _native_artifact(jnp.linalg.cholesky, jax.ShapeDtypeStruct((n, n), np.float32))
    assert "tensor<?x?xf32>" in artifact.mlir_module()
    fn = jax2tf_native.call_exported(artifact)
    assert fn.lapack_rewritten == ("lapack_spotrf_ffi",)
    for size in (2, 5):
        a = np.random.default_rng(size).normal(size=(size, size)).astype(np.float32)
        spd = a @ a.T + size * np.eye(size, dtype=np.float32)
        np.testing.assert_allclose(np.asarray(fn(spd)), artifact.call(spd), rtol=1e-5,
                                   atol=1e-6)
