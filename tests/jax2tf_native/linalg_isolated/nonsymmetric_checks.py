"""Portable eig / schur / hessenberg: `convert(..., linalg="portable")` in TF vs JAX's LAPACK.

Every case runs the converted function in TF (eager, and for a subset under
`tf.function(jit_compile=True)`) and compares with `jax.jit` on CPU, which calls LAPACK.
Where LAPACK's result is defined element for element (hessenberg's packed reflectors and
taus; eigenvectors of complex input up to round-off) the values are compared directly;
otherwise through properties: A = Z T Z^H with Z unitary and T in LAPACK's (quasi-)triangular
structure, A V = V diag(w), vl^H A = w vl^H, geev's normalization, the eigenvalue multiset,
and residuals within 3x LAPACK's (plus a few ulps of slack for tiny sizes).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native.errors import ArgumentShapeError
from tests import matrix

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS = {np.float32: 1.2e-7, np.complex64: 1.2e-7, np.float64: 2.3e-16, np.complex128: 2.3e-16}
# Sizes 0, 1, 2, odd, batched and 64; the double-precision types (same code, other
# tolerances) run fewer of them to keep the suite fast.
SHAPES = {np.float32: [(0, 0), (1, 1), (2, 2), (5, 5), (2, 3, 7, 7), (64, 64)],
          np.complex64: [(0, 0), (2, 2), (5, 5), (2, 3, 7, 7), (64, 64)],
          np.float64: [(1, 1), (2, 2), (3, 7, 7)],
          np.complex128: [(1, 1), (3, 7, 7)]}


def _matrix(rng, dtype, shape):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _x64(dtype):
    return jax.enable_x64(np.dtype(dtype) in (np.float64, np.complex128))


def _in_tf(fun, *args, jit_compile=False):
    """The converted `fun` run in TF: a list of numpy arrays."""
    f_tf = jax2tf_native.convert(fun, linalg="portable")
    if jit_compile:
        f_tf = tf.function(f_tf, autograph=False, jit_compile=True)
    return [np.asarray(o) for o in tf.nest.flatten(f_tf(*[tf.constant(a) for a in args]))]


def _in_jax(fun, *args):
    return [np.asarray(o) for o in jax.tree.leaves(jax.jit(fun)(*args))]


def _ids(params):
    return [f"{np.dtype(d).name}-{'x'.join(map(str, s))}" for d, s in params]


# CI runs float32 at every size and complex64 up to 5x5; the full matrix every case
# (tests/matrix.py).
CASES = [(d, s) for d in DTYPES for s in SHAPES[d]]


def _in_ci(dtype, shape) -> bool:
    return dtype == np.float32 or (dtype == np.complex64 and len(shape) == 2
                                   and shape[-1] <= 5)


def _params(cases):
    return [matrix.in_ci(d, s, id=_ids([(d, s)])[0], ci=_in_ci(d, s)) for d, s in cases]


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _norm(x):
    return np.linalg.norm(x, axis=(-2, -1)) if x.size else np.zeros(x.shape[:-2])


def _rel(residual, a):
    """Per-matrix relative residual ||R||_F / ||A||_F (0 for empty)."""
    return _norm(residual) / np.maximum(_norm(a), 1e-30)


def _assert_within_lapack(ours, lapack, dtype, n):
    slack = 10 * max(n, 1) * EPS[dtype]
    assert np.all(ours <= 3 * lapack + slack), (ours, lapack)


def _match_eigenvalues(w, w_ref):
    """Index array `p` with w[i] ~ w_ref[p[i]] (greedy nearest, per matrix)."""
    order = np.empty(w.shape, np.int64)
    for idx in np.ndindex(w.shape[:-1]):
        free = list(range(w.shape[-1]))
        for i, x in enumerate(w[idx]):
            j = min(free, key=lambda j: abs(w_ref[idx][j] - x))
            free.remove(j)
            order[idx + (i,)] = j
    return order


# ---------------------------------------------------------------------------
# hessenberg: LAPACK gehrd's packed layout, element for element.

@pytest.mark.parametrize("dtype, shape", _params([c for c in CASES if c[1][-1] > 0]))
def test_hessenberg_matches_lapack_gehrd_elementwise(dtype, shape, rng):
    a = _matrix(rng, dtype, shape)
    n = shape[-1]
    with _x64(dtype):
        packed, taus = _in_tf(jax.lax.linalg.hessenberg, a)
        want_packed, want_taus = _in_jax(jax.lax.linalg.hessenberg, a)
    assert packed.dtype == want_packed.dtype and taus.shape == want_taus.shape
    scale = np.max(np.abs(a), initial=1.0)
    tol = 30 * n * EPS[dtype]
    np.testing.assert_allclose(packed, want_packed, rtol=0, atol=tol * scale)
    np.testing.assert_allclose(taus, want_taus, rtol=0, atol=tol)
    # The packed reflectors rebuild A = Q H Q^H.
    with _x64(dtype):
        q = np.asarray(jax.jit(lambda p, t: jnp.broadcast_to(jnp.eye(n, dtype=p.dtype), p.shape).at[..., 1:, 1:].set(
            jax.lax.linalg.householder_product(p[..., 1:, :n - 1], t)))(packed, taus)) \
            if n > 1 else np.ones_like(a)
    h = np.triu(packed, -1)
    assert np.all(_rel(q @ h @ _mH(q) - a, a) <= 30 * n * EPS[dtype])


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_hessenberg_of_a_0x0_matrix_fails_in_jax_and_is_our_error(shape):
    # (issue19sem) JAX's own CPU path cannot lower it either (taus would have -1 entries): a raw
    # MLIR error there; ours names the primitive, the shape, n and the fix.
    a = np.zeros(shape, np.float32)
    with pytest.raises(Exception, match="invalid tensor dimension size"):
        jax.jit(jax.lax.linalg.hessenberg)(a)
    with pytest.raises(ArgumentShapeError,
                       match=rf"hessenberg got an operand of shape \({shape[0]}, 0.*n >= 1.*Fix: "
                             r"skip the call when n == 0, or use jax.scipy.linalg.hessenberg"):
        jax2tf_native.convert(lambda x: jax.lax.linalg.hessenberg(x)[0] + 1)(a)
    # The suggested fix works: jax.scipy.linalg.hessenberg returns the empty matrix in TF.
    h = jax2tf_native.convert(jax.scipy.linalg.hessenberg)(np.zeros((0, 0), np.float32))
    assert h.shape == (0, 0)


# ---------------------------------------------------------------------------
# schur: A = Z T Z^H, LAPACK's structure (real Schur form for real input).

def _assert_schur_structure(t, dtype):
    n = t.shape[-1]
    if np.dtype(dtype).kind == "c":
        assert np.all(np.tril(t, -1) == 0)
        return
    assert np.all(np.tril(t, -2) == 0)
    sub = np.diagonal(t, -1, axis1=-2, axis2=-1)
    # 2x2 blocks never overlap, and are standardized like LAPACK's lanv2.
    assert not np.any((sub[..., 1:] != 0) & (sub[..., :-1] != 0))
    for idx in np.ndindex(t.shape[:-2]):
        for k in np.nonzero(sub[idx])[0]:
            block = t[idx][k:k + 2, k:k + 2]
            assert block[0, 0] == block[1, 1] and block[0, 1] * block[1, 0] < 0, block
    del n


@pytest.mark.parametrize("dtype, shape", _params(CASES))
def test_schur_is_a_schur_decomposition_like_lapacks(dtype, shape, rng):
    a = _matrix(rng, dtype, shape)
    n = shape[-1]
    with _x64(dtype):
        t, z = _in_tf(jsl.schur, a)
        want_t, want_z = _in_jax(jsl.schur, a)
    assert t.dtype == want_t.dtype == np.dtype(dtype) and t.shape == want_t.shape
    _assert_schur_structure(t, dtype)
    _assert_schur_structure(want_t, dtype)  # the structure compared with is LAPACK's own
    _assert_within_lapack(_rel(z @ t @ _mH(z) - a, a),
                          _rel(want_z @ want_t @ _mH(want_z) - a, a), dtype, n)
    eye = np.eye(n)
    _assert_within_lapack(_norm(_mH(z) @ z - eye), _norm(_mH(want_z) @ want_z - eye), dtype, n)
    if n:
        w = np.linalg.eigvals(t.astype(np.complex128))
        w_ref = np.linalg.eigvals(want_t.astype(np.complex128))
        w_ref = np.take_along_axis(w_ref, _match_eigenvalues(w, w_ref), -1)
        np.testing.assert_allclose(w, w_ref, rtol=0, atol=1e3 * EPS[dtype] * np.max(np.abs(a)))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_schur_without_vectors_and_under_jit_compile(dtype, rng):
    a = _matrix(rng, dtype, (2, 6, 6))
    fun = lambda x: (jax.lax.linalg.schur(x, compute_schur_vectors=False), jsl.schur(x))
    with _x64(dtype):
        t, t_full, z = _in_tf(fun, a, jit_compile=True)
        want_t, want_z = _in_jax(jsl.schur, a)
    # Same algorithm with or without Z: the same T.
    np.testing.assert_allclose(t, t_full, rtol=0, atol=50 * EPS[dtype])
    _assert_schur_structure(t, dtype)
    _assert_within_lapack(_rel(z @ t_full @ _mH(z) - a, a),
                          _rel(want_z @ want_t @ _mH(want_z) - a, a), dtype, 6)


@pytest.mark.parametrize("dtype", [np.float32, matrix.in_ci(np.float64, id="float64", ci=False),
                                   np.complex64])
def test_sqrtm_and_funm_through_schur_match_jax(dtype, rng):
    # A matrix with a positive spectrum so that sqrtm is well conditioned.
    a = _matrix(rng, dtype, (6, 6)) * 0.3 + 3 * np.eye(6, dtype=dtype)
    tol = 1e4 * EPS[dtype]
    with _x64(dtype):
        for fun in (jsl.sqrtm, lambda x: jsl.funm(x, jnp.exp)):
            got, = _in_tf(fun, a)
            want, = _in_jax(fun, a)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(got, np.asarray(jsl.expm(a)), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# eig: eigenvalues, left and right eigenvectors.

def _assert_geev_normalized(v, dtype):
    n = v.shape[-1]
    if not n:
        return
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=20 * n * EPS[dtype])
    k = np.argmax(np.abs(v) ** 2, axis=-2)
    top = np.take_along_axis(v, k[..., None, :], -2)
    assert np.all(np.imag(top) == 0)
    if np.dtype(dtype).kind == "c":
        assert np.all(np.real(top) > 0)


def _assert_real_input_structure(w, vs):
    """Real input: real eigenvalues exactly real with real vectors; conjugate pairs."""
    real = np.imag(w) == 0
    for v in vs:
        assert np.all(np.imag(v)[..., real[..., None, :].repeat(v.shape[-2], -2)] == 0)
    for idx in np.ndindex(w.shape[:-1]):
        k = 0
        while k < w.shape[-1]:
            if np.imag(w[idx][k]) == 0:
                k += 1
                continue
            assert np.imag(w[idx][k]) > 0 and w[idx][k + 1] == np.conj(w[idx][k])
            for v in vs:
                assert np.all(v[idx][:, k + 1] == np.conj(v[idx][:, k]))
            k += 2


@pytest.mark.parametrize("dtype, shape", _params(CASES))
def test_eig_matches_lapack(dtype, shape, rng):
    a = _matrix(rng, dtype, shape)
    n = shape[-1]
    with _x64(dtype):
        w, vl, vr = _in_tf(jax.lax.linalg.eig, a)
        want_w, want_vl, want_vr = _in_jax(jax.lax.linalg.eig, a)
    assert w.dtype == want_w.dtype and vr.shape == want_vr.shape and vl.shape == want_vl.shape
    order = _match_eigenvalues(w, want_w)
    scale = np.max(np.abs(a), initial=1.0)
    np.testing.assert_allclose(w, np.take_along_axis(want_w, order, -1), rtol=0,
                               atol=1e3 * EPS[dtype] * scale)
    right = lambda w, v: a @ v - v * w[..., None, :]
    left = lambda w, v: _mH(v) @ a - w[..., :, None] * _mH(v)
    _assert_within_lapack(_rel(right(w, vr), a), _rel(right(want_w, want_vr), a), dtype, n)
    _assert_within_lapack(_rel(left(w, vl), a), _rel(left(want_w, want_vl), a), dtype, n)
    _assert_geev_normalized(vr, dtype)
    _assert_geev_normalized(vl, dtype)
    # Random matrices have well separated eigenvalues: each eigenvector equals LAPACK's up to
    # the sign a real eigenvector is free to take (complex input: exactly geev's phase).
    for v, want_v in ((vr, want_vr), (vl, want_vl)):
        want_v = np.take_along_axis(want_v, order[..., None, :], -1)
        if np.dtype(dtype).kind == "c":
            np.testing.assert_allclose(v, want_v, rtol=0, atol=1e4 * EPS[dtype])
        else:
            phase = np.sum(np.conj(want_v) * v, axis=-2, keepdims=True)
            np.testing.assert_allclose(np.abs(phase), 1, atol=1e4 * EPS[dtype])
    if np.dtype(dtype).kind == "f":
        _assert_real_input_structure(w, (vl, vr))


FLAGS = [(True, True), (False, True), (True, False), (False, False)]


def test_eig_flags_jnp_eig_and_eigvals_under_jit_compile(rng):
    a = _matrix(rng, np.float32, (2, 5, 5))
    fun = lambda x: ([jax.lax.linalg.eig(x, compute_left_eigenvectors=left,
                                         compute_right_eigenvectors=right)
                      for left, right in FLAGS], jnp.linalg.eig(x), jnp.linalg.eigvals(x))
    got = _in_tf(fun, a, jit_compile=True)
    want = _in_jax(fun, a)
    assert [g.shape for g in got] == [w.shape for w in want]
    assert [g.dtype for g in got] == [w.dtype for w in want]
    w, vl, vr = got[:3]
    order = _match_eigenvalues(w, want[0])
    np.testing.assert_allclose(w, np.take_along_axis(want[0], order, -1), atol=1e-5)
    # Every variant gives the full call's results (same algorithm, same eigenvalue order).
    expected = [w, vl, vr, w, vr, w, vl, w, w, vr, w]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-5)


def test_eig_under_a_polymorphic_batch(rng):
    a = _matrix(rng, np.complex64, (3, 4, 4))
    f_tf = jax2tf_native.convert(jnp.linalg.eigvals, polymorphic_shapes=["(b, 4, 4)"])
    graph = tf.function(f_tf, autograph=False,
                        input_signature=[tf.TensorSpec([None, 4, 4], tf.complex64)])
    for batch in (1, 3):
        got = graph(a[:batch]).numpy()
        want = np.asarray(jax.jit(jnp.linalg.eigvals)(a[:batch]))
        order = _match_eigenvalues(got, want)
        np.testing.assert_allclose(got, np.take_along_axis(want, order, -1), atol=1e-5)


def test_symbolic_matrix_size_runs_in_one_graph(rng):
    # (issue19sem) A symbolic n used to be refused at export; one graph now serves every n.
    f_tf = jax2tf_native.convert(jnp.linalg.eigvals, polymorphic_shapes=["(n, n)"])
    graph = tf.function(f_tf, autograph=False,
                        input_signature=[tf.TensorSpec([None, None], tf.float32)])
    for n in (1, 2, 6):
        a = _matrix(rng, np.float32, (n, n))
        got = graph(a).numpy()
        want = np.asarray(jax.jit(jnp.linalg.eigvals)(a))
        order = _match_eigenvalues(got[None], want[None])[0]
        np.testing.assert_allclose(got, want[order], atol=1e-4, err_msg=f"n={n}")


# ---------------------------------------------------------------------------
# Gradients where JAX defines them (eig's JVP; schur and hessenberg have none).

def _eigval_loss(a):
    w = jnp.linalg.eigvals(a)
    return jnp.sum(jnp.real(w) * jnp.arange(w.shape[-1])) + jnp.sum(jnp.imag(w) ** 2)


def _eigvec_loss(a):
    w, vr = jax.lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
    return jnp.sum(jnp.abs(w) ** 2) + jnp.sum(jnp.abs(vr[..., 0, :]) ** 2 * jnp.real(w))


@pytest.mark.parametrize("loss, dtype", [
    pytest.param(_eigval_loss, np.float32, id="eigvals-f32"),
    pytest.param(_eigvec_loss, np.float32, id="eigvecs-f32"),
    matrix.in_ci(_eigval_loss, np.float64, id="eigvals-f64", ci=False)])
def test_eig_gradient_matches_jax(loss, dtype, rng):
    a = _matrix(rng, dtype, (2, 4, 4))
    with _x64(dtype):
        f_tf = jax2tf_native.convert(loss, linalg="portable")
        a_var = tf.Variable(a)
        with tf.GradientTape() as tape:
            value = f_tf(a_var)
        grad = tape.gradient(value, a_var).numpy()
        want_value, want_grad = jax.jit(jax.value_and_grad(loss))(a)
    tol = 1e4 * EPS[dtype]
    np.testing.assert_allclose(value.numpy(), want_value, rtol=tol, atol=tol)
    np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol)


def test_non_finite_input_gives_nan_without_iterating(rng):
    # LAPACK's geev fails (info > 0) and JAX returns NaN; the portable QR iteration stops at
    # once instead of running its 30 n sweeps.
    a = _matrix(rng, np.float32, (2, 5, 5))
    a[1, 0, 1] = np.nan
    fun = lambda x: (jax.lax.linalg.eig(x), jsl.schur(x))
    w, vl, vr, t, z = _in_tf(fun, a)
    want_w, want_vl, want_vr = _in_jax(jax.lax.linalg.eig, a)
    for got, want in ((w, want_w), (vl, want_vl), (vr, want_vr)):
        assert np.all(np.isnan(got[1])) and np.all(np.isnan(want[1]))
        assert np.all(np.isfinite(got[0]))
    assert np.all(np.isnan(t[1])) and np.all(np.isnan(z[1])) and np.all(np.isfinite(t[0]))
