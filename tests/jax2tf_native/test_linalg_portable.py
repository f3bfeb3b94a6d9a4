"""Portable linear algebra: exports made in `linalg_portable.export_scope` run in TensorFlow.

Every case exports a JAX function inside the scope, runs the module in TF through
`jax2tf_native.call_exported` (TF 2.21, CPU) and compares with JAX's own (LAPACK) result;
the `convert(..., linalg=...)` tests at the end go through the user-facing API. Decompositions
whose output is unique only up to signs (eigh, svd) are compared through invariants.
"""
from __future__ import annotations

import re
import threading
import zlib

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native import linalg_portable

# A LAPACK custom call in MLIR text (not e.g. a test name in a location).
_LAPACK_TARGET = re.compile(
    r'custom_call\s*@(lapack_\w+|LuDecomposition)|call_target_name\s*=\s*"lapack_')


# ---------------------------------------------------------------------------
# Running an Exported in TF: through the library's own call path (re-serialization for TF,
# the custom-call allowlist, the XlaCallModule op).

def run_in_tf(exported: jax.export.Exported, *args, in_tf_function: bool = False):
    """Runs `exported` on `args` with jax2tf_native.call_exported; a list of numpy arrays."""
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    if in_tf_function:
        call = tf.function(call, autograph=False)
    return [np.asarray(o) for o in jax.tree.leaves(call(*[tf.constant(a) for a in args]))]


def export_portable(fun, *args_or_specs, platforms=("cpu",)):
    with linalg_portable.export_scope(platforms=platforms) as extra:
        exported = jax.export.export(jax.jit(fun), platforms=platforms, **extra)(*args_or_specs)
    linalg_portable.check_module_portable(exported)
    return exported


# ---------------------------------------------------------------------------
# Inputs. Small, well-conditioned matrices: the comparison is with JAX at float32 tolerance.

N = 4
BATCH = (2,)


def _general(rng, dtype, shape=(*BATCH, N, N)):
    return (rng.standard_normal(shape) + 2 * N ** 0.5 * np.eye(*shape[-2:])).astype(dtype)


def _spd(rng, dtype, shape=(*BATCH, N, N)):
    b = rng.standard_normal(shape)
    return (b @ np.swapaxes(b, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _rhs(rng, dtype, shape=(*BATCH, N, 2)):
    return rng.standard_normal(shape).astype(dtype)


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _eigh_invariants(w, v):
    """Eigenvalues, reconstruction V diag(w) V^T and V^T V: free of eigenvector signs."""
    return w, (v * w[..., None, :]) @ _mT(v), _mT(v) @ v


def _svd_invariants(u, s, vh):
    k = s.shape[-1]
    return s, (u[..., :k] * s[..., None, :]) @ vh[..., :k, :], _mT(u) @ u, vh @ _mT(vh)


def _tall(rng, dtype):
    return _general(rng, dtype, (*BATCH, 5, 3))


# name -> (function, input builders, invariant applied to the TF and the JAX outputs or None).
# Related functions share a case (one export, one XLA compilation each in TF and JAX).
CASES = {
    "cholesky_cho_factor_cho_solve": (
        lambda s, b: (jnp.linalg.cholesky(s), jnp.tril(jsl.cho_factor(s, lower=True)[0]),
                      jsl.cho_solve(jsl.cho_factor(s), b)),
        (_spd, _rhs), None),
    "solve_inv": (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)),
                  (_general, _rhs), None),
    "det_slogdet": (lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a)), (_general,), None),
    "solve_triangular": (
        lambda a, b: (jsl.solve_triangular(jnp.tril(a), b, lower=True),
                      jsl.solve_triangular(jnp.triu(a), b, trans=1)),
        (_general, _rhs), None),
    "lu_factor_lu_solve_lu": (
        lambda a, b: (*jsl.lu_factor(a), jsl.lu_solve(jsl.lu_factor(a), b),
                      *jax.lax.linalg.lu(a)),
        (_general, _rhs), None),
    "qr_reduced_and_complete": (
        lambda a, t: (*jnp.linalg.qr(a), *jnp.linalg.qr(t, mode="complete")),
        (_general, _tall), None),
    # These bind the geqrf primitive directly (not qr), see jax2tf_native/_jax_internals.py.
    "qr_raw_slogdet_qr_qr_multiply": (
        lambda a, c: (*jnp.linalg.qr(a, mode="raw"), *jnp.linalg.slogdet(a, method="qr"),
                      jsl.qr_multiply(a, c)[0]),
        (_general, lambda rng, dt: _rhs(rng, dt, (*BATCH, 3, N))), None),
    "eigh_eigvalsh": (lambda s: (*jnp.linalg.eigh(s), jnp.linalg.eigvalsh(s)), (_spd,),
                      lambda w, v, w2: (*_eigh_invariants(w, v), w2)),
    # One input for the SVD family: XLA compiles the shared SVD once (lstsq is 2-D only).
    "svd_svdvals_pinv_lstsq": (
        lambda a, b: (*jnp.linalg.svd(a, full_matrices=False), jnp.linalg.svdvals(a),
                      jnp.linalg.pinv(a), *jnp.linalg.lstsq(a, b)),
        (lambda rng, dt: _general(rng, dt, (6, 3)), lambda rng, dt: _rhs(rng, dt, (6, 2))),
        lambda u, s, vh, *rest: (*_svd_invariants(u, s, vh), *rest)),
    # Wide, full_matrices, and rank 2 of 3 (the rank-deficiency correction path).
    "svd_full_matrices_wide_rank_deficient": (
        lambda a: tuple(jnp.linalg.svd(a, full_matrices=True)),
        (lambda rng, dt: (rng.standard_normal((*BATCH, 3, 2))
                          @ rng.standard_normal((*BATCH, 2, 5))).astype(dt),),
        _svd_invariants),
    "matrix_power": (lambda a: (jnp.linalg.matrix_power(a, 3), jnp.linalg.matrix_power(a, -2)),
                     (_general,), None),
    "expm": (lambda a: jsl.expm(a / 4), (_general,), None),
}

# Tolerances: float32 results must agree with JAX within float32 round-off of these small,
# well-conditioned problems; float64 results must be float64-accurate, not merely float32.
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-11}


def _compare(got, want, tol):
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# float64 runs every case but one, whose float64 code path svd_svdvals_pinv_lstsq-f64 runs
# too; the SVD's XLA compilation dominates the suite's time.
_F64_SKIPPED = ("svd_full_matrices_wide_rank_deficient",)
_PARAMS = ([pytest.param(name, np.float32, id=f"{name}-f32") for name in CASES]
           + [pytest.param(name, np.float64, id=f"{name}-f64")
              for name in CASES if name not in _F64_SKIPPED])


@pytest.mark.parametrize("name, dtype", _PARAMS)
def test_function_runs_in_tf_and_matches_jax(name, dtype):
    fun, builders, invariant = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    with jax.enable_x64(dtype == np.float64):
        args = [b(rng, dtype) for b in builders]
        exported = export_portable(fun, *args)
        # float32 runs go through a tf.function, float64 runs eagerly: both ways are covered.
        got = run_in_tf(exported, *args, in_tf_function=(dtype == np.float32))
        want = [np.asarray(x) for x in jax.tree.leaves(jax.jit(fun)(*args))]
    # Proves x64 was really on for float64 (else JAX silently computes in float32).
    assert all(w.dtype == dtype or w.dtype.kind in "iu" for w in want), [w.dtype for w in want]
    if invariant is not None:
        got, want = invariant(*got), invariant(*want)
    _compare(got, want, TOLERANCE[dtype])


def test_portable_module_has_no_lapack_call_but_native_one_does(rng):
    """The scope is what removes LAPACK: the same function exported natively keeps it."""
    a, b = _general(rng, np.float32), _rhs(rng, np.float32)

    def everything(a, b):
        s = a @ _mT(a)
        return (jnp.linalg.solve(a, b), jnp.linalg.cholesky(s), jnp.linalg.qr(a)[0],
                jnp.linalg.eigvalsh(s), jnp.linalg.svd(a)[1], jnp.linalg.det(a))

    native = jax.export.export(jax.jit(everything), platforms=("cpu",))(a, b)
    assert _LAPACK_TARGET.search(native.mlir_module())
    with pytest.raises(linalg_portable.NonPortableLinalgError, match="lapack_"):
        linalg_portable.check_module_portable(native)

    portable = export_portable(everything, a, b)
    assert not _LAPACK_TARGET.search(portable.mlir_module())
    assert set(linalg_portable.custom_call_targets(portable)) <= \
        linalg_portable.PORTABLE_CUSTOM_CALL_TARGETS


def test_polymorphic_batch_dimension(rng):
    a, b = _general(rng, np.float32, (3, N, N)), _rhs(rng, np.float32, (3, N, 2))
    specs = jax.export.symbolic_args_specs((a, b), (f"b, {N}, {N}", f"b, {N}, 2"))

    def everything(a, b):
        s = a @ _mT(a)
        return (jnp.linalg.solve(a, b), jnp.linalg.cholesky(s), jnp.linalg.qr(a)[1],
                jnp.linalg.eigvalsh(s), jnp.linalg.svd(a, compute_uv=False))

    exported = export_portable(everything, *specs)
    assert not isinstance(exported.in_avals[0].shape[0], int)
    _compare(run_in_tf(exported, a, b), jax.tree.leaves(jax.jit(everything)(a, b)),
             TOLERANCE[np.float32])

    # One module, several batch sizes (kept to the cheap LU path: each size compiles anew).
    solve = export_portable(jnp.linalg.solve, *specs)
    for batch in (3, 1):
        _compare(run_in_tf(solve, a[:batch], b[:batch]),
                 [jnp.linalg.solve(a[:batch], b[:batch])], TOLERANCE[np.float32])


def _distinct_spectrum_spd(rng, dtype):
    q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    return ((q * np.arange(1.0, N + 1)) @ q.T).astype(dtype)


GRADIENTS = {
    "solve": (jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2), argnums=(0, 1)),
              lambda rng: (_general(rng, np.float32, (N, N)), _rhs(rng, np.float32, (N, 2)))),
    "cholesky": (jax.grad(lambda s, w: jnp.sum(jnp.linalg.cholesky(s) * w)),
                 lambda rng: (_spd(rng, np.float32, (N, N)), _rhs(rng, np.float32, (N, N)))),
    # |V| and eigenvalues are sign-free, so the cotangent is well defined.
    "eigh": (jax.grad(lambda s: jnp.sum(jnp.linalg.eigh(s)[0] * jnp.arange(N))
                      + jnp.sum(jnp.abs(jnp.linalg.eigh(s)[1]))),
             lambda rng: (_distinct_spectrum_spd(rng, np.float32),)),
    # vjp through U, S, V^H of the (sign-free) reconstruction and the singular values.
    "svd": (lambda a, ct: jax.vjp(
                lambda a: (lambda u, s, vh: ((u * s) @ vh, s))(
                    *jnp.linalg.svd(a, full_matrices=False)), a)[1]((ct, jnp.arange(N) * 1.0)),
            lambda rng: (_general(rng, np.float32, (N, N)), _rhs(rng, np.float32, (N, N)))),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradient_exports_portably_and_matches_jax(name, rng):
    fun, make_args = GRADIENTS[name]
    args = make_args(rng)
    exported = export_portable(fun, *args)
    assert not _LAPACK_TARGET.search(exported.mlir_module())
    got = run_in_tf(exported, *args)
    want = jax.tree.leaves(jax.jit(fun)(*args))
    _compare(got, want, 1e-4)


# eig, schur and hessenberg: tests/jax2tf_native/linalg_isolated/nonsymmetric_checks.py; the rest:
# tests/jax2tf_native/linalg_isolated/primitive_checks.py; symbolic sizes (also two unrelated ones,
# "m, n"):
# tests/jax2tf_native/linalg_isolated/symbolic_checks.py. Every primitive and option has a portable
# form.


def test_export_scope_rejects_unknown_platform():
    with pytest.raises(ValueError, match="unknown: \\['tpu_v9'\\].*Fix: pass the platform"):
        with linalg_portable.export_scope(platforms=("cpu", "tpu_v9")):
            pass
    with linalg_portable.export_scope(platforms=("gpu",)) as extra:  # as everywhere: cuda
        assert extra


def test_scope_is_not_fooled_by_jit_caches_and_does_not_leak(rng):
    """jnp.linalg functions are jitted: warm JAX's caches natively, export portably, then
    check native lowering (and execution) is still LAPACK."""
    a, b = _general(rng, np.float32, (N, N)), _rhs(rng, np.float32, (N, 2))
    solve = jax.jit(jnp.linalg.solve)
    want = np.asarray(solve(a, b))  # compiles and caches the LAPACK lowering
    assert _LAPACK_TARGET.search(solve.lower(a, b).as_text())

    portable = export_portable(solve, a, b)  # the same jitted function object
    assert not _LAPACK_TARGET.search(portable.mlir_module())
    np.testing.assert_allclose(run_in_tf(portable, a, b)[0], want, rtol=1e-5, atol=1e-5)

    assert _LAPACK_TARGET.search(solve.lower(a, b).as_text())
    native = jax.export.export(solve, platforms=("cpu",))(a, b)
    assert _LAPACK_TARGET.search(native.mlir_module())
    np.testing.assert_allclose(np.asarray(solve(a, b)), want, rtol=0, atol=0)


def test_concurrent_portable_and_native_exports(rng):
    a = _general(rng, np.float32, (N, N))
    results, errors = {}, []

    def work(i):
        try:
            if i % 2:
                results[i] = export_portable(jnp.linalg.inv, a).mlir_module()
            else:
                results[i] = jax.export.export(
                    jax.jit(jnp.linalg.inv), platforms=("cpu",))(a).mlir_module()
        except Exception as e:  # noqa: BLE001 -- re-raised below with the thread's index
            errors.append((i, e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, text in results.items():
        assert bool(_LAPACK_TARGET.search(text)) == (i % 2 == 0), i


def test_multi_platform_export_is_portable_everywhere(rng):
    a = _general(rng, np.float32, (N, N))
    exported = export_portable(jnp.linalg.inv, a, platforms=("cpu", "cuda"))
    # Custom-call targets only: debug locations may name files such as lapack_rewrite/*.py.
    assert not re.search(r'custom_call @"?(cusolver|lapack_)', exported.mlir_module())
    np.testing.assert_allclose(run_in_tf(exported, a)[0], np.linalg.inv(a), rtol=1e-5, atol=1e-5)


def _with_condition_number(rng, n, cond, symmetric):
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v = u if symmetric else np.linalg.qr(rng.standard_normal((n, n)))[0]
    return ((u * np.logspace(0, -np.log10(cond), n)) @ v.T).astype(np.float32)


def test_condition_number_1e4_float32_is_backward_stable(rng):
    """Ill-conditioned float32 inputs (docs/linalg.md has the measured table).

    Solvers must be backward stable (normwise residual <= n * eps, the property LAPACK
    guarantees) with forward error within the cond * n * eps bound.
    """
    n, cond = 16, 1e4
    eps = float(np.finfo(np.float32).eps)
    a = _with_condition_number(rng, n, cond, symmetric=False)
    s = _with_condition_number(rng, n, cond, symmetric=True)
    b = rng.standard_normal((n, 1)).astype(np.float32)
    a64, s64, b64 = (x.astype(np.float64) for x in (a, s, b))
    assert 0.9 * cond < np.linalg.cond(a64) < 1.1 * cond

    def solves(a, s, b):
        return (jnp.linalg.solve(a, b), jsl.lu_solve(jsl.lu_factor(a), b),
                jsl.cho_solve(jsl.cho_factor(s), b))

    for x, m64 in zip(run_in_tf(export_portable(solves, a, s, b), a, s, b), (a64, a64, s64)):
        x = x.astype(np.float64)
        x_true = np.linalg.solve(m64, b64)
        backward = np.linalg.norm(m64 @ x - b64) / (np.linalg.norm(m64, 2) * np.linalg.norm(x))
        forward = np.linalg.norm(x - x_true) / np.linalg.norm(x_true)
        assert backward <= n * eps, backward
        assert forward <= cond * n * eps, forward

    # Symmetric eigenvalues are well conditioned: absolute error <= n * eps * |A|.
    # (The SVD at this condition number is measured in docs/linalg.md; here it would
    # add a multi-second XLA compilation for no new property.)
    w = run_in_tf(export_portable(jnp.linalg.eigvalsh, s), s)[0]
    assert np.max(np.abs(w - np.linalg.eigvalsh(s64))) <= n * eps * np.linalg.norm(s64, 2)


def test_eigh_hard_spectra_are_accurate():
    """Cases where XLA's Jacobi expansion alone falls short (see the eigh comment in
    linalg_portable): a tiny-scaled float32 matrix, and float64 clusters / graded spectra."""
    rng = np.random.default_rng(7)
    n = 12
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))

    def check(w, v, m, tol):
        m = m.astype(np.float64)
        scale = np.linalg.norm(m, 2)
        assert np.max(np.abs(((v * w) @ _mT(v)) - m)) <= tol * scale
        assert np.max(np.abs(_mT(v) @ v - np.eye(n))) <= tol
        np.testing.assert_allclose(w, np.linalg.eigvalsh(m), rtol=0, atol=tol * scale)

    tiny = ((q * np.arange(1.0, n + 1)) @ q.T * 1e-20).astype(np.float32)
    check(*run_in_tf(export_portable(jnp.linalg.eigh, tiny), tiny), tiny,
          n * np.finfo(np.float32).eps)

    near = np.linspace(1.0, 2.0, n)
    near[1] = near[0] + 1e-9
    with jax.enable_x64(True):
        clustered = (q * near) @ q.T
        graded = (q * np.logspace(0, -10, n)) @ q.T
        both = lambda a, b: (*jnp.linalg.eigh(a), *jnp.linalg.eigh(b))
        w1, v1, w2, v2 = run_in_tf(export_portable(both, clustered, graded), clustered, graded)
    check(w1, v1, clustered, n * np.finfo(np.float64).eps)
    check(w2, v2, graded, n * np.finfo(np.float64).eps)


def test_tridiagonal_solve_and_ormqr(rng):
    """The other CPU-LAPACK primitives with a portable lowering."""
    d = (rng.standard_normal((2, 6)) + 4).astype(np.float32)
    dl, du = rng.standard_normal((2, 2, 6)).astype(np.float32)
    dl[:, 0] = du[:, -1] = 0
    rhs = _rhs(rng, np.float32, (2, 6, 3))
    h, taus = (np.asarray(x) for x in jnp.linalg.qr(_general(rng, np.float32, (5, 3)),
                                                    mode="raw"))
    c = _rhs(rng, np.float32, (5, 2))

    def fun(dl, d, du, rhs, h, taus, c):
        return (jax.lax.linalg.tridiagonal_solve(dl, d, du, rhs),
                jax.lax.linalg.ormqr(h.mT, taus, c),
                jax.lax.linalg.ormqr(h.mT, taus, c.T, left=False, transpose=True))

    args = (dl, d, du, rhs, h, taus, c)
    _compare(run_in_tf(export_portable(fun, *args), *args), jax.jit(fun)(*args), 2e-5)


def test_column_pivoted_qr_runs_in_tf(rng):
    """jax.scipy.linalg.qr / qr_multiply with pivoting=True (geqp3): LAPACK's pivots."""
    a = rng.standard_normal((5, 4)).astype(np.float32) * np.logspace(0, -2, 4, dtype=np.float32)
    c = rng.standard_normal((2, 5)).astype(np.float32)

    def fun(a, c):
        q, r, p = jsl.qr(a, pivoting=True)
        return q, r, p, *jsl.qr_multiply(a, c, pivoting=True)

    got = run_in_tf(export_portable(fun, a, c), a, c)
    want = jax.tree.leaves(jax.jit(fun)(a, c))
    np.testing.assert_array_equal(got[2], want[2])
    _compare(got, want, 2e-5)


# ---------------------------------------------------------------------------
# Through convert(): the default linalg="portable", eager, tf.function, polymorphic batch,
# gradients; linalg="native" is refused by the allowlist; what has no portable form (qr with
# two unrelated symbolic sizes) fails at export.

def test_convert_default_is_portable_eager_graph_and_gradient(rng):
    a = _general(rng, np.float32, (3, N, N))
    b = _rhs(rng, np.float32, (3, N, 2))
    fun = lambda a, b: jnp.linalg.solve(a, b) + jsl.cho_solve(
        jsl.cho_factor(a @ jnp.swapaxes(a, -1, -2)), b)
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=[f"(b, {N}, {N})", f"(b, {N}, 2)"])
    graph = tf.function(f_tf, autograph=False, input_signature=[
        tf.TensorSpec([None, N, N], tf.float32), tf.TensorSpec([None, N, 2], tf.float32)])
    for batch in (1, 3):
        want = np.asarray(jax.jit(fun)(a[:batch], b[:batch]))
        np.testing.assert_allclose(f_tf(a[:batch], b[:batch]).numpy(), want, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(graph(a[:batch], b[:batch]).numpy(), want, rtol=2e-5,
                                   atol=2e-5)
    a_var = tf.Variable(a)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(f_tf(a_var, b) ** 2)
    want_grad = jax.grad(lambda a: jnp.sum(fun(a, b) ** 2))(a)
    np.testing.assert_allclose(tape.gradient(loss, a_var).numpy(), want_grad, rtol=1e-3,
                               atol=1e-4)


def test_convert_native_linalg_is_refused_for_tf(rng):
    a = _general(rng, np.float32, (N, N))
    with pytest.raises(jax2tf_native.CustomCallNotAllowedError,
                       match=r"lapack_sgetrf_ffi.*linalg='portable'"):
        jax2tf_native.convert(jnp.linalg.inv, linalg="native")(a)
    with pytest.raises(ValueError, match="linalg must be one of"):
        jax2tf_native.convert(jnp.linalg.inv, linalg="lapack")


def test_convert_qr_with_unrelated_symbolic_m_n_equals_jax(rng):
    # JAX's own CPU lowering refuses this shape ("'m' < 'n' is inconclusive"); ours needs no
    # comparison of m with n. One conversion, run tall and wide.
    tf_qr = tf.function(jax2tf_native.convert(jnp.linalg.qr, polymorphic_shapes=["(m, n)"]),
                        autograph=False)
    for shape in [(5, 3), (3, 5)]:
        a = _general(rng, np.float32, shape)
        _compare(tf_qr(a), jnp.linalg.qr(a), TOLERANCE[np.float32])
