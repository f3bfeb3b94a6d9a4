"""Each `jax.lax.linalg` primitive bound directly: portable lowering in TF == JAX's CPU lowering.

JAX's CPU lowering calls LAPACK; the portable lowering (jax2tf_native.linalg) runs in TF's XLA.
Where LAPACK defines every element of a result (cholesky with its untouched upper triangle and
NaN on failure, LU with its pivots, Householder QR's reflectors and taus, tridiagonal reduction,
column-pivoted QR, gtsv, triangular solves, eigenvalues, singular values) the two must agree
element for element up to rounding. Eigenvectors and singular vectors are unique only up to
phase, so they are checked through properties (A V = V diag(w), A = U S V^H, orthonormality).

Each case binds the primitive on several shapes (0, 1, 2, odd, batched, and one of 64+) in one
exported function per dtype, to keep the number of XLA compilations (the cost here) small.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax import lax

import jax2tf_native
from jax2tf_native import _jax_internals, linalg_portable
from tests import matrix

lin = lax.linalg
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
IDS = ["f32", "f64", "c64", "c128"]
# All four dtypes in the full matrix (tests/matrix.py); in CI one per primitive, float32 for
# half of them (those with a blocked path, taken at the 65x65 size that only float32 runs, and
# the perturbed tridiagonal solve) and complex128 for the other half.
F32_IN_CI = matrix.dtype_params(DTYPES, IDS, ci=("f32",))
C128_IN_CI = matrix.dtype_params(DTYPES, IDS, ci=("c128",))
SQUARE = [(0, 0), (1, 1), (2, 2), (5, 5), (2, 3, 3)]


def _big(dtype):
    # One 64+ size per primitive, in float32 only, to keep compilations few.
    return [(65, 65)] if dtype == np.float32 else []


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _hpd(rng, shape, dtype):
    a = _rand(rng, shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _hermitian(a, lower):
    """The Hermitian matrix whose `lower` (or upper) triangle eigh reads; real diagonal."""
    strict = np.tril(a, -1) if lower else np.triu(a, 1)
    diag = np.real(np.diagonal(a, 0, -2, -1))
    return strict + np.conj(np.swapaxes(strict, -1, -2)) + diag[..., None] * np.eye(a.shape[-1])


def _eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def both(fn, *args):
    """(JAX CPU outputs, TF portable outputs) of jit(fn)(*args), as lists of numpy arrays."""
    with jax.enable_x64(True):
        want = [np.asarray(o) for o in jax.tree.leaves(jax.jit(fn)(*args))]
        with linalg_portable.export_scope(platforms=("cpu",)) as extra:
            exported = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(*args)
    linalg_portable.check_module_portable(exported)
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    got = [np.asarray(o) for o in jax.tree.leaves(call(*[tf.constant(a) for a in args]))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    return want, got


def assert_same(got, want, dtype, *, scale=None, factor=200.0, what=""):
    """Element for element up to rounding: |got - want| <= factor * eps * n * scale."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.size == 0:
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    finite = ~np.isnan(want)
    if not finite.any():
        return
    if scale is None:
        scale = max(np.max(np.abs(want[finite])), 1.0)
    n = max(want.shape[-1] if want.ndim else 1, 1)
    err = np.max(np.abs(got[finite] - want[finite]))
    assert err <= factor * _eps(dtype) * n * scale, f"{what}: max |diff| {err:.3g}"


def _assert_unitary(q, dtype, what):
    k = q.shape[-1]
    gram = np.conj(np.swapaxes(q, -1, -2)) @ q
    assert_same(gram, np.broadcast_to(np.eye(k, dtype=gram.dtype), gram.shape), dtype,
                scale=1.0, what=what + " orthonormal")


# ---------------------------------------------------------------------------
# Factorizations LAPACK defines element for element.

@pytest.mark.parametrize("dtype", C128_IN_CI)
def test_cholesky_p_keeps_the_upper_triangle_and_nans_a_failed_matrix(dtype):
    rng = np.random.default_rng(1)
    mats = [_hpd(rng, s, dtype) for s in SQUARE + _big(dtype)]
    # potrf leaves the strict upper triangle as given: make it unrelated to the lower one.
    mats = [m + np.triu(_rand(rng, m.shape, dtype), 1) for m in mats]
    failed = np.stack([_hpd(rng, (4, 4), dtype), -_hpd(rng, (4, 4), dtype)])
    want, got = both(lambda *xs: [lin.cholesky_p.bind(x) for x in xs], *mats, failed)
    for w, g, m in zip(want, got, mats + [failed]):
        assert_same(g, w, dtype, what=f"cholesky {m.shape}")
    assert np.isnan(got[-1][1]).all() and not np.isnan(got[-1][0]).any()


@pytest.mark.parametrize("dtype", C128_IN_CI)
def test_lu_p_equals_getrf_with_pivots_and_permutation(dtype):
    rng = np.random.default_rng(2)
    shapes = SQUARE + [(3, 5), (5, 3)] + _big(dtype)
    mats = [_rand(rng, s, dtype) for s in shapes]
    singular = _rand(rng, (4, 4), dtype)
    singular[:, 1] = 0  # an exactly zero pivot: getrf continues, JAX returns no NaN
    mats.append(singular)
    want, got = both(lambda *xs: [lin.lu_p.bind(x) for x in xs], *mats)
    for i, m in enumerate(mats):
        lu_w, piv_w, perm_w = want[3 * i:3 * i + 3]
        lu_g, piv_g, perm_g = got[3 * i:3 * i + 3]
        np.testing.assert_array_equal(piv_g, piv_w, err_msg=f"pivots {m.shape}")
        np.testing.assert_array_equal(perm_g, perm_w, err_msg=f"permutation {m.shape}")
        assert_same(lu_g, lu_w, dtype, what=f"lu {m.shape}")


@pytest.mark.parametrize("dtype", F32_IN_CI)
def test_householder_qr_primitives_equal_lapack(dtype):
    """geqrf, householder_product (orgqr), ormqr and qr_p: LAPACK's reflectors, signs, taus."""
    rng = np.random.default_rng(3)
    shapes = SQUARE + [(3, 5), (5, 3)] + _big(dtype)
    mats = [_rand(rng, s, dtype) for s in shapes]

    def fn(*xs):
        out = []
        for x in xs:
            out += list(_jax_internals.geqrf_p.bind(x))
            for full in (True, False):
                out += list(lin.qr_p.bind(x, pivoting=False, full_matrices=full,
                                          use_magma=None))
        return out

    want, got = both(fn, *mats)
    for w, g in zip(want, got):
        assert_same(g, w, dtype, what="qr")
    # householder_product and ormqr on LAPACK's own geqrf output.
    a = _rand(rng, (2, 6, 4), dtype)
    with jax.enable_x64(True):
        r, taus = (np.asarray(x) for x in jax.jit(_jax_internals.geqrf_p.bind)(a))
    c_left, c_right = _rand(rng, (2, 6, 3), dtype), _rand(rng, (2, 3, 6), dtype)
    want, got = both(lambda r, t, cl, cr: [
        lin.householder_product_p.bind(r, t),
        lin.ormqr_p.bind(r, t, cl, left=True, transpose=True),
        lin.ormqr_p.bind(r, t, cr, left=False, transpose=False)], r, taus, c_left, c_right)
    for w, g in zip(want, got):
        assert_same(g, w, dtype, what="householder_product/ormqr")


@pytest.mark.parametrize("dtype", C128_IN_CI)
def test_geqp3_and_pivoted_qr_equal_lapack(dtype):
    rng = np.random.default_rng(4)
    shapes = [(1, 1), (2, 2), (5, 5), (3, 5), (6, 4), (2, 3, 3)] + _big(dtype)
    mats = [_rand(rng, s, dtype) for s in shapes]
    # Graded columns: the pivot order matters and partial norms get recomputed. (Not
    # rank-deficient: there the trailing columns are rounding noise and so are the pivots.)
    graded = _rand(rng, (7, 6), dtype) * np.logspace(0, -3, 6)
    mats.append(graded)
    fixed = _rand(rng, (5, 5), dtype)
    jpvt_fixed = np.array([0, 1, 0, 1, 0], np.int32)  # columns 1 and 3 go first

    def fn(*xs):
        *xs, f, jf = xs
        out = []
        for x in xs:
            out += list(_jax_internals.geqp3_p.bind(
                x, jnp.zeros(x.shape[:-1][:-1] + x.shape[-1:], np.int32), use_magma=None))
        for x in xs[2:4]:  # qr_p(pivoting=True) = geqp3 + householder_product
            out += list(lin.qr_p.bind(x, pivoting=True, full_matrices=False, use_magma=None))
        return out + list(_jax_internals.geqp3_p.bind(f, jf, use_magma=None))

    want, got = both(fn, *mats, fixed, jpvt_fixed)
    for w, g in zip(want, got):
        if w.dtype == np.int32:
            np.testing.assert_array_equal(g, w, err_msg="pivots")
        else:
            assert_same(g, w, dtype, what="geqp3")


@pytest.mark.parametrize("dtype", F32_IN_CI)
def test_tridiagonal_p_equals_sytrd(dtype):
    rng = np.random.default_rng(5)
    shapes = [(1, 1), (2, 2), (5, 5), (2, 4, 4)] + _big(dtype)
    mats = [_rand(rng, s, dtype) for s in shapes]  # not Hermitian: one triangle is read
    want, got = both(lambda *xs: [o for x in xs for lower in (True, False)
                                  for o in lin.tridiagonal_p.bind(x, lower=lower)], *mats)
    for w, g in zip(want, got):
        assert_same(g, w, dtype, what="tridiagonal")


@pytest.mark.parametrize("dtype", C128_IN_CI)
def test_triangular_solve_p_equals_trsm(dtype):
    rng = np.random.default_rng(6)
    a = _rand(rng, (2, 5, 5), dtype) + 4 * np.eye(5, dtype=dtype)  # other triangle: junk
    b_left, b_right = _rand(rng, (2, 5, 3), dtype), _rand(rng, (2, 3, 5), dtype)
    flags = [dict(left_side=l, lower=lo, transpose_a=t, conjugate_a=c, unit_diagonal=u)
             for l in (True, False) for lo in (True, False)
             for t, c in ((False, False), (True, False), (True, True), (False, True))
             for u in (False, True)]

    def fn(a, bl, br):
        return [lin.triangular_solve_p.bind(a, bl if f["left_side"] else br, **f)
                for f in flags]

    want, got = both(fn, a, b_left, b_right)
    for w, g, f in zip(want, got, flags):
        assert_same(g, w, dtype, what=f"triangular_solve {f}")


@pytest.mark.parametrize("dtype", C128_IN_CI)
def test_tridiagonal_solve_p_equals_gtsv(dtype):
    rng = np.random.default_rng(7)
    cases = []
    for shape in [(1,), (2,), (7,), (2, 5), (66,)]:
        dl, d, du = (_rand(rng, shape, dtype) for _ in range(3))  # not diagonally dominant
        cases.append((dl, d, du, _rand(rng, (*shape, 2), dtype)))
    dl, d, du, b = (np.array(x) for x in cases[2])
    d[0] = dl[1] = 0  # a zero pivot with no row to swap in: gtsv fails, JAX gives NaN
    cases.append((dl, d, du, b))
    flat = [x for case in cases for x in case]
    want, got = both(lambda *xs: [lin.tridiagonal_solve_p.bind(*xs[i:i + 4],
                                                               perturb_singular=False)
                                  for i in range(0, len(xs), 4)], *flat)
    for w, g in zip(want, got):
        # gtsv's result is its solution: compare relative to it (the systems are random).
        assert_same(g, w, dtype, factor=2000.0, what="tridiagonal_solve")
    assert np.isnan(got[-1]).all()


def _singular_tridiagonal(rng, n, dtype):
    """(dl, d, du) of T - lambda I for an eigenvalue lambda of a random T: singular."""
    dl, d, du = (_rand(rng, (n,), dtype) for _ in range(3))
    if np.dtype(dtype).kind == "f":
        du[:-1] = dl[1:]  # symmetric: real eigenvalues
    t = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    lam = np.linalg.eigvals(t.astype(np.complex128 if np.dtype(dtype).kind == "c"
                                     else np.float64))
    return dl, (d - np.real_if_close(lam[n // 2])).astype(dtype), du


def _tridiagonal_batches(rng, dtype):
    """{n: (names, dl, d, du, b)}: one batch of systems per size, to keep compilations few."""
    systems = {n: [] for n in (1, 2, 7, 64)}
    for n in systems:
        systems[n].append(("random",) + tuple(_rand(rng, (n,), dtype) for _ in range(3)))
        if n > 1:  # singular systems are what the flag is for
            systems[n].append(("singular",) + _singular_tridiagonal(rng, n, dtype))
    zero = np.zeros((1,), dtype)
    systems[1].append(("zero",) + (zero, zero, zero))
    dl, d, du = (_rand(rng, (7,), dtype) for _ in range(3))
    systems[7].append(("zero diagonal", dl, np.zeros_like(d), du))
    d0, dl0 = d.copy(), dl.copy()
    d0[0], dl0[1] = 0, 0  # a zero pivot with no row to swap in (gtsv fails on it)
    systems[7].append(("zero pivot", dl0, d0, du))
    tiny = d0.copy()
    tiny[0] = np.finfo(dtype).tiny / 8  # subnormal: flushed to 0 by XLA's CPU runtime, for both
    systems[7].append(("subnormal pivot", dl0, tiny, du))
    systems[7].append(("zero matrix",) + (np.zeros((7,), dtype),) * 3)
    return {n: ([c[0] for c in cases],
                *(np.stack([c[i] for c in cases]) for i in (1, 2, 3)),
                _rand(rng, (len(cases), n, 2), dtype))
            for n, cases in systems.items()}


@pytest.mark.parametrize("dtype", F32_IN_CI)
def test_tridiagonal_solve_perturbed_equals_jaxlib_bit_for_bit(dtype):
    # JAX's CPU lowering of perturb_singular=True is jaxlib's tridiagonal_solve_perturbed_ffi
    # kernel. On a singular system the solution is ~1/eps and set by the last bits of tiny
    # pivots, so "up to rounding" would hide any difference: compare bit for bit, eager and
    # under jit_compile.
    batches = _tridiagonal_batches(np.random.default_rng(17), dtype)
    flat = [x for names, *arrays in batches.values() for x in arrays]
    fn = lambda *xs: [lin.tridiagonal_solve(*xs[i:i + 4], perturb_singular=True)
                      for i in range(0, len(xs), 4)]
    with jax.enable_x64(True):
        want = [np.asarray(o) for o in jax.jit(fn)(*flat)]
        with linalg_portable.export_scope(platforms=("cpu",)) as extra:
            exported = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(*flat)
    assert "@tridiagonal_solve_perturbed_ffi" not in exported.mlir_module()
    linalg_portable.check_module_portable(exported)
    call = jax2tf_native.call_exported(exported, with_gradient=False)
    eager = call(*[tf.constant(x) for x in flat])
    compiled = tf.function(call, jit_compile=True, autograph=False)(*flat)
    for (names, *_), w, e, c in zip(batches.values(), want, eager, compiled):
        for i, name in enumerate(names):
            what = f"n={w.shape[-2]} {name}"
            np.testing.assert_array_equal(np.asarray(e)[i], w[i], err_msg=f"eager {what}")
            np.testing.assert_array_equal(np.asarray(c)[i], w[i], err_msg=f"jit {what}")
            assert np.isfinite(w[i]).all(), what  # the flag's promise, singular or not
            if name == "singular":
                assert np.abs(w[i]).max() > 1e3, what  # singular indeed: a huge solution


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_tridiagonal_solve_perturbed_gradient_under_jit_compile(dtype):
    rng = np.random.default_rng(18)
    dl, d, du = _singular_tridiagonal(rng, 6, dtype)
    d = d + np.asarray(1e-3, dtype)  # near-singular, so the gradient is finite
    b = _rand(rng, (6, 2), dtype)

    def loss(d, b):
        x = lin.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
        return jnp.sum(jnp.abs(x) ** 2)

    grad = jax.grad(loss, argnums=(0, 1))
    with jax.enable_x64(True):
        want = [np.asarray(g) for g in jax.jit(grad)(d, b)]
        with linalg_portable.export_scope(platforms=("cpu",)) as extra:
            exported = jax.export.export(jax.jit(grad), platforms=("cpu",), **extra)(d, b)
    linalg_portable.check_module_portable(exported)
    call = tf.function(jax2tf_native.call_exported(exported, with_gradient=False),
                       jit_compile=True, autograph=False)
    for g, w in zip(call(d, b), want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_small_gpu_only_primitives_lower_to_plain_hlo_on_cpu():
    rng = np.random.default_rng(8)
    pivots = np.array([[2, 3, 3, 5], [0, 1, 5, 3]], np.int32)
    a = _rand(rng, (4, 4), np.float32)
    want, got = both(lambda p, a: [lin.lu_pivots_to_permutation_p.bind(p, permutation_size=6),
                                   lin.symmetric_product_p.bind(a, a, alpha=2.0, beta=0.5)],
                     pivots, a)
    np.testing.assert_array_equal(got[0], want[0])
    assert_same(got[1], want[1], np.float32, what="symmetric_product")


# ---------------------------------------------------------------------------
# Spectral decompositions: values element for element, vectors by their properties.

@pytest.mark.parametrize("dtype", F32_IN_CI)
def test_eigh_p_values_equal_syevd_and_vectors_diagonalize(dtype):
    rng = np.random.default_rng(9)
    shapes = SQUARE + ([(65, 65)] if dtype == np.float32 else [])
    mats = [_rand(rng, s, dtype) for s in shapes]  # one triangle is read
    # (lower, sort_eigenvalues) alternate over the shapes; LAPACK always sorts.
    params = [((True, True), (False, False))[i % 2] for i in range(len(mats))]

    def fn(*xs):
        return [o for x, (lower, sort) in zip(xs, params)
                for o in lin.eigh_p.bind(x, lower=lower, sort_eigenvalues=sort,
                                         subset_by_index=None, algorithm=None)]

    want, got = both(fn, *mats)
    for i, (m, (lower, _)) in enumerate(zip(mats, params)):
        v, w = got[2 * i], got[2 * i + 1]
        assert_same(w, want[2 * i + 1], dtype, what=f"eigenvalues {m.shape}")
        herm = _hermitian(m, lower).astype(dtype)
        assert_same(herm @ v, v * w[..., None, :].astype(dtype), dtype,
                    what=f"A V = V diag(w) {m.shape}")
        _assert_unitary(v, dtype, f"eigenvectors {m.shape}")


@pytest.mark.parametrize("dtype", F32_IN_CI)
def test_svd_p_values_equal_gesdd_and_vectors_reconstruct(dtype):
    rng = np.random.default_rng(10)
    # (shape, full_matrices, compute_uv); each svd is a QDWH + eigh to compile, so few.
    cases = [((2, 2), False, False), ((3, 5), True, True), ((2, 3, 3), False, True)]
    if dtype == np.float32:
        cases += [((0, 0), False, True), ((1, 1), True, True), ((6, 2), False, True),
                  ((65, 65), False, True)]
    mats = [_rand(rng, s, dtype) for s, _, _ in cases]

    def fn(*xs):
        return [o for x, (_, full, uv) in zip(xs, cases)
                for o in lin.svd_p.bind(x, full_matrices=full, compute_uv=uv,
                                        subset_by_index=None, algorithm=None)]

    want, got = both(fn, *mats)
    k = 0
    for m, (_, full, uv) in zip(mats, cases):
        s = got[k]
        assert_same(s, want[k], dtype, what=f"singular values {m.shape}")
        if uv:
            u, vh = got[k + 1], got[k + 2]
            r = min(m.shape[-2:])
            us = u[..., :, :r] * s[..., None, :].astype(dtype)
            assert_same(us @ vh[..., :r, :], m, dtype, what=f"A = U S V^H {m.shape}")
            _assert_unitary(u, dtype, f"U {m.shape}")
            _assert_unitary(np.conj(np.swapaxes(vh, -1, -2)), dtype, f"V {m.shape}")
            k += 3
        else:
            k += 1


# ---------------------------------------------------------------------------
# Partial spectra (JAX has them on TPU only, so the reference is the full decomposition).

@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_subset_by_index_slices_the_full_spectrum(dtype):
    rng = np.random.default_rng(11)
    a = _hpd(rng, (2, 6, 6), dtype)
    g = _rand(rng, (2, 7, 5), dtype)

    def fn(a, g):
        v, w = lin.eigh_p.bind(a, lower=True, sort_eigenvalues=True,
                               subset_by_index=(1, 4), algorithm=None)
        s, u, vh = lin.svd_p.bind(g, full_matrices=False, compute_uv=True,
                                  subset_by_index=(0, 2), algorithm=None)
        return v, w, s, u, vh

    with jax.enable_x64(True):
        w_all = np.asarray(jnp.linalg.eigvalsh(a))
        s_all = np.asarray(jnp.linalg.svd(g, compute_uv=False))
        with linalg_portable.export_scope(platforms=("cpu",)) as extra:
            exported = jax.export.export(jax.jit(fn), platforms=("cpu",), **extra)(a, g)
    v, w, s, u, vh = (np.asarray(x) for x in jax2tf_native.call_exported(
        exported, with_gradient=False)(tf.constant(a), tf.constant(g)))
    assert_same(w, w_all[..., 1:4], dtype, what="eigh subset")
    assert_same(a @ v, v * w[..., None, :].astype(dtype), dtype, what="eigh subset vectors")
    assert_same(s, s_all[..., 0:2], dtype, what="svd subset")
    assert_same(np.conj(np.swapaxes(u, -1, -2)) @ g @ np.conj(np.swapaxes(vh, -1, -2)),
                (np.broadcast_to(np.eye(2), (2, 2, 2)) * s[..., None, :]).astype(dtype),
                dtype, what="U^H A V = diag(s) on the subset")


# ---------------------------------------------------------------------------
# Gradients JAX defines, through the new portable rules, under tf.function(jit_compile=True).

def test_gradients_of_newly_portable_primitives_under_jit_compile():
    rng = np.random.default_rng(12)
    a = (_rand(rng, (5, 4), np.float32) * np.logspace(0, -1, 4)).astype(np.float32)
    dl, d, du = (_rand(rng, (6,), np.float32) for _ in range(3))
    d = d + 4
    rhs = _rand(rng, (6, 2), np.float32)
    h = _rand(rng, (6, 5), np.float32)

    def loss(a, d, rhs, h, partial=True):
        q, r, _ = lin.qr(a, pivoting=True, full_matrices=False)  # JAX's qr JVP, pivoted
        x = lin.tridiagonal_solve(dl, d, du, rhs)  # gtsv JVP + transpose
        if partial:  # partial SVD JVP (JAX's CPU lowering has no partial SVD: see below)
            s = lin.svd(h, compute_uv=False, subset_by_index=(0, 2))
        else:
            s = lin.svd(h, compute_uv=False)[:2]
        return jnp.sum(q * 0.5) + jnp.sum(r ** 2) + jnp.sum(x ** 2) + jnp.sum(s)

    grad = jax.grad(loss, argnums=(0, 1, 2, 3))
    args = (a, d, rhs, h)
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(grad), platforms=("cpu",), **extra)(*args)
    linalg_portable.check_module_portable(exported)
    call = tf.function(jax2tf_native.call_exported(exported, with_gradient=False),
                       jit_compile=True, autograph=False)
    got = [np.asarray(g) for g in call(*[tf.constant(x) for x in args])]
    full_grad = jax.grad(functools.partial(loss, partial=False), argnums=(0, 1, 2, 3))
    want = [np.asarray(g) for g in jax.jit(full_grad)(*args)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)
