"""Portable linear algebra exported with a symbolic matrix size ("b, n, n") runs in TF.

One export per function, with polymorphic batch *and* matrix size, run in TF at two concrete
sizes and compared with JAX's own (LAPACK) results at those sizes.
"""
from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax import lax

import jax2tf_native
from jax2tf_native import _jax_internals, linalg_portable
from jax2tf_native.linalg.errors import lower_symbolic
from tests import matrix

lin = lax.linalg
SIZES = [(2, 3), (1, 7)]  # (b, n) values the one export is run at


def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _spd(rng, b, n):
    a = _rand(rng, (b, n, n), np.float64)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


def _general(rng, b, n):
    return _rand(rng, (b, n, n)) + 2 * np.sqrt(n) * np.eye(n, dtype=np.float32)


def _export_symbolic(fn, specs):
    scope = jax.export.SymbolicScope()
    structs = [jax.ShapeDtypeStruct(jax.export.symbolic_shape(s, scope=scope), dtype)
               for s, dtype in specs]
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(*structs)
    linalg_portable.check_module_portable(exported)
    return exported


def _values(fn, make_args, specs, *, rtol=2e-4, atol=2e-5):
    exported = _export_symbolic(fn, specs)
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    rng = np.random.default_rng(0)
    for b, n in SIZES:
        args = make_args(rng, b, n)
        want = jax.tree.leaves(jax.jit(fn)(*args))
        got = jax.tree.leaves(call(*[tf.constant(a) for a in args]))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol,
                                       err_msg=f"b={b}, n={n}")


CASES = {
    "cholesky": (lambda a: lin.cholesky_p.bind(a), lambda r, b, n: [_spd(r, b, n)]),
    "lu": (lambda a: lin.lu_p.bind(a), lambda r, b, n: [_general(r, b, n)]),
    "solve": (jnp.linalg.solve,
              lambda r, b, n: [_general(r, b, n), _rand(r, (b, n, n))]),
    "qr": (lambda a: jnp.linalg.qr(a), lambda r, b, n: [_rand(r, (b, n, n))]),
    "qr_full_pivoted": (lambda a: lin.qr(a, pivoting=True, full_matrices=True),
                        lambda r, b, n: [_rand(r, (b, n, n))]),
    "ormqr": (lambda a, c: lin.ormqr(*_jax_internals.geqrf_p.bind(a), c, left=True,
                                     transpose=True),
              lambda r, b, n: [_rand(r, (b, n, n)), _rand(r, (b, n, n))]),
    "svdvals": (lambda a: jnp.linalg.svd(a, compute_uv=False),
                lambda r, b, n: [_general(r, b, n)]),
    "eigvalsh": (jnp.linalg.eigvalsh, lambda r, b, n: [_spd(r, b, n)]),
    "tridiagonal": (lambda a: lin.tridiagonal(a, lower=True),
                    lambda r, b, n: [_rand(r, (b, n, n))]),
    "tridiagonal_solve": (
        lambda dl, d, du, x: lin.tridiagonal_solve(dl, d, du, x),
        lambda r, b, n: [_rand(r, (b, n)), _rand(r, (b, n)), _rand(r, (b, n)),
                         _rand(r, (b, n, 2))]),
}
# (issue19sem) The non-symmetric family with a symbolic n: rolled QR-iteration loops. Their
# eigenvalue order and vector phases are algorithm-defined, so the module exported with "b, n, n"
# is compared with the same function exported at the concrete shape (same algorithm: equal up to
# rounding), and eigenvalues also with JAX's LAPACK ones as multisets.
NONSYMMETRIC = {
    "hessenberg": (lambda a: lin.hessenberg(a), np.float32),
    "schur_real": (lambda a: lin.schur(a), np.float64),
    "schur_complex": (lambda a: lin.schur(a), np.complex64),
    "eig_real": (lambda a: lin.eig(a), np.float32),
    "eig_complex": (lambda a: lin.eig(a), np.complex128),
    "eigvals": (jnp.linalg.eigvals, np.float32),
}
NONSYMMETRIC_SIZES = [(2, 3), (1, 7), (1, 1), (2, 2)]


# CI: the Hessenberg step, a complex Schur and a real eig (eigenvalues and vectors; eigvals of a
# symbolic n is nonsymmetric_checks.py's too); the full matrix adds the real Schur, the complex
# eig and eigvals (tests/matrix.py).
_NONSYMMETRIC_FULL_ONLY = ("schur_real", "eig_complex", "eigvals")


@pytest.mark.parametrize("name", [matrix.in_ci(n, id=n, ci=n not in _NONSYMMETRIC_FULL_ONLY)
                                  for n in sorted(NONSYMMETRIC)])
def test_nonsymmetric_symbolic_matrix_size_runs_in_tf(name):
    fn, dtype = NONSYMMETRIC[name]
    with jax.enable_x64(np.dtype(dtype) in (np.float64, np.complex128)):
        exported = _export_symbolic(fn, [("b, n, n", dtype)])
        call = jax2tf_native.call_exported(exported, with_gradient=False)
        rng = np.random.default_rng(3)
        for b, n in NONSYMMETRIC_SIZES:
            a = _rand(rng, (b, n, n), np.float64)
            if np.dtype(dtype).kind == "c":
                a = a + 1j * _rand(rng, (b, n, n), np.float64)
            a = a.astype(dtype)
            with linalg_portable.export_scope(platforms=("cpu",)) as extra:
                concrete = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(a)
            want = jax.tree.leaves(jax2tf_native.call_exported(concrete, with_gradient=False)(a))
            got = jax.tree.leaves(call(tf.constant(a)))
            assert len(got) == len(want)
            tol = 50 * n * np.finfo(dtype).eps
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol,
                                           err_msg=f"b={b}, n={n}")
            if name.startswith("eig"):  # the same spectrum as JAX's LAPACK
                lapack = np.sort_complex(np.asarray(jnp.linalg.eigvals(a)).reshape(-1))
                ours = np.sort_complex(np.asarray(got[0]).reshape(-1))
                np.testing.assert_allclose(ours, lapack, rtol=1e-3, atol=1e-4)


SPECS = {"solve": ["b, n, n", "b, n, n"], "ormqr": ["b, n, n", "b, n, n"],
         "tridiagonal_solve": ["b, n", "b, n", "b, n", "b, n, 2"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_matrix_size_runs_in_tf(name):
    fn, make_args = CASES[name]
    specs = [(s, np.float32) for s in SPECS.get(name, ["b, n, n"])]
    _values(fn, make_args, specs)


def test_svd_with_symbolic_size_reconstructs():
    def fn(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return (u * s[..., None, :]) @ vh, jnp.swapaxes(u, -1, -2) @ u

    exported = _export_symbolic(fn, [("b, n, n", np.float32)])
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    rng = np.random.default_rng(1)
    for b, n in SIZES:
        a = _rand(rng, (b, n, n))
        recon, gram = (np.asarray(x) for x in call(tf.constant(a)))
        np.testing.assert_allclose(recon, a, atol=2e-5 * n)
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(n), gram.shape), atol=2e-5 * n)


# Two unrelated symbolic sizes "b, m, n": one export run at tall, wide, square and
# one-row/one-column shapes. JAX's own CPU lowering refuses qr here ("'m' < 'n' is
# inconclusive"); the portable forms need no comparison (qr, ormqr) or pick the orientation
# at run time (svd).
MN_SIZES = [(2, 5, 3), (1, 3, 5), (2, 4, 4), (1, 1, 3), (1, 6, 1)]


def _run_mn(fn, dtype=np.float32, seed=5):
    """(a, outputs in TF, JAX's outputs) for each of MN_SIZES, from one "b, m, n" export."""
    exported = _export_symbolic(fn, [("b, m, n", dtype)])
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    rng = np.random.default_rng(seed)
    for b, m, n in MN_SIZES:
        a = _rand(rng, (b, m, n), np.float64)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * _rand(rng, (b, m, n), np.float64)
        a = a.astype(dtype)
        got = [np.asarray(x) for x in jax.tree.leaves(call(tf.constant(a)))]
        want = [np.asarray(x) for x in jax.tree.leaves(jax.jit(fn)(a))]
        assert [g.shape for g in got] == [w.shape for w in want], (b, m, n)
        yield a, got, want


QR_MN = {
    "reduced": lambda a: lin.qr(a, full_matrices=False),
    "complete": lambda a: lin.qr(a, full_matrices=True),
    "pivoted": lambda a: lin.qr(a, pivoting=True, full_matrices=False),
}


@pytest.mark.parametrize("mode", sorted(QR_MN))
def test_qr_with_unrelated_symbolic_m_n_equals_lapack(mode):
    # Householder QR is LAPACK's algorithm: Q, R (and pivots) equal JAX's element for element.
    for a, got, want in _run_mn(QR_MN[mode]):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5, err_msg=str(a.shape))


def test_ormqr_with_taus_of_an_unrelated_symbolic_length_equals_lapack():
    # taus has its own symbol k: the reflectors are gathered by index, no size comparison.
    def fn(a, taus, c):
        return lin.ormqr(a, taus, c, left=True, transpose=True)

    exported = _export_symbolic(fn, [("m, n", np.float32), ("k,", np.float32),
                                     ("m, r", np.float32)])
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    rng = np.random.default_rng(6)
    for m, n, r in [(5, 3, 2), (3, 5, 1), (4, 4, 3)]:
        a, taus = (np.asarray(x) for x in _jax_internals.geqrf_p.bind(_rand(rng, (m, n))))
        c = _rand(rng, (m, r))
        for k in (min(m, n), 1):  # all reflectors, and only the first one
            got = call(tf.constant(a), tf.constant(taus[:k]), tf.constant(c))
            np.testing.assert_allclose(np.asarray(got), np.asarray(fn(a, taus[:k], c)),
                                       rtol=1e-4, atol=2e-5, err_msg=f"{m, n, r, k}")


def _rank_deficient(a):
    """a with its last column (or row, whichever is longer) a copy of the first."""
    a = a.copy()
    if a.shape[-1] >= a.shape[-2] and a.shape[-1] > 1:
        a[..., :, -1] = a[..., :, 0]
    elif a.shape[-2] > 1:
        a[..., -1, :] = a[..., 0, :]
    return a


# CI: reduced float32 and full complex64; the full matrix all four (tests/matrix.py).
@pytest.mark.parametrize("dtype, full_matrices", [
    matrix.in_ci(d, full, id=f"{i}-{mode}", ci=(i, mode) in (("f32", "reduced"), ("c64", "full")))
    for d, i in ((np.float32, "f32"), (np.complex64, "c64"))
    for full, mode in ((False, "reduced"), (True, "full"))])
def test_svd_with_unrelated_symbolic_m_n_matches_lapack(full_matrices, dtype):
    """Singular values equal JAX's; U S V^H reconstructs A; U and V^H are unitary, also for a
    rank-deficient A (whose null-space vectors the algorithm must still orthonormalize)."""
    def fn(a):
        return lin.svd(a, full_matrices=full_matrices)

    exported = _export_symbolic(fn, [("b, m, n", dtype)])
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    rng = np.random.default_rng(7)
    for b, m, n in MN_SIZES:
        a = _rand(rng, (b, m, n), np.float64)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * _rand(rng, (b, m, n), np.float64)
        for x in (a.astype(dtype), _rank_deficient(a).astype(dtype)):
            u, s, vh = (np.asarray(t) for t in call(tf.constant(x)))
            u_j, s_j, vh_j = (np.asarray(t) for t in fn(x))
            where = f"b={b}, m={m}, n={n}"
            assert (u.shape, s.shape, vh.shape) == (u_j.shape, s_j.shape, vh_j.shape), where
            np.testing.assert_allclose(s, s_j, rtol=1e-4, atol=1e-5 * max(m, n), err_msg=where)
            k = min(m, n)
            recon = (u[..., :, :k] * s[..., None, :].astype(dtype)) @ vh[..., :k, :]
            np.testing.assert_allclose(recon, x, atol=3e-5 * max(m, n), err_msg=where)
            for q in (u, np.conj(np.swapaxes(vh, -1, -2))):
                gram = np.conj(np.swapaxes(q, -1, -2)) @ q
                np.testing.assert_allclose(gram, np.broadcast_to(np.eye(q.shape[-1]),
                                                                 gram.shape),
                                           atol=3e-5 * max(m, n), err_msg=where)


# CI: the symbolic n side; the full matrix adds the symbolic m side (tests/matrix.py).
@pytest.mark.parametrize("spec, shapes", [
    pytest.param("b, 3, n", [(2, 3, 2), (1, 3, 5), (1, 3, 3)], id="b, 3, n-shapes0"),
    matrix.in_ci("b, m, 3", [(1, 2, 3), (2, 5, 3)], id="b, m, 3-shapes1", ci=False)])
def test_svd_with_one_static_and_one_symbolic_size(spec, shapes):
    # min(3, n) and max(3, n) are symbolic while the static side is not: the factors are
    # padded and sliced to exact sizes (a static size built from symbolic pieces lowered to a
    # mismatched MLIR type before).
    for full_matrices in (False, True):
        def fn(a):
            return lin.svd(a, full_matrices=full_matrices)

        call = jax2tf_native.call_exported(_export_symbolic(fn, [(spec, np.float32)]),
                                           with_gradient=False)
        rng = np.random.default_rng(8)
        for shape in shapes:
            a = _rand(rng, shape)
            u, s, vh = (np.asarray(t) for t in call(tf.constant(a)))
            u_j, s_j, vh_j = (np.asarray(t) for t in fn(a))
            where = f"{shape}, full_matrices={full_matrices}"
            assert (u.shape, vh.shape) == (u_j.shape, vh_j.shape), where
            np.testing.assert_allclose(s, s_j, rtol=1e-4, atol=1e-5, err_msg=where)
            k = min(shape[1:])
            np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a,
                                       atol=2e-5 * max(shape), err_msg=where)


def test_undecidable_shape_comparison_is_our_error():
    """The net under every portable rule: a comparison of symbolic sizes that jax.export
    cannot decide becomes NonPortableLinalgError with the fix, not JAX's raw error. No
    primitive reaches it any more (qr, ormqr and svd were the last), so it is checked
    directly on the context a lowering rule receives."""
    m, n = jax.export.symbolic_shape("m, n")
    ctx = types.SimpleNamespace(avals_in=[jax.core.ShapedArray((m, n), np.float32)],
                                module_context=types.SimpleNamespace(platforms=("cpu",)))

    def lower():
        return m < n  # what an algorithm that branches on the orientation would ask

    with pytest.raises(linalg_portable.NonPortableLinalgError,
                       match=r"'qr'.*cpu.*\('m', 'n'\) are symbolic.*'m' < 'n' is inconclusive"
                             r".*Fix: give the matrix dimensions one symbol"):
        lower_symbolic(ctx, "qr", lower)
