"""Linear algebra in plain graphs on TF's own kernels (issue 36): `convert(f,
enable_xla=False)` keeps JAX's LAPACK calls for cholesky, triangular_solve, eigh and svd and
lowers them to `Cholesky`, `MatrixTriangularSolve`, `SelfAdjointEigV2` and `Svd`
(`tf_ops/plain/lapack_kernels.py`). Values and gradients against `jax.jit` / `jax.grad` on CPU
(JAX's LAPACK results); eigenvectors and singular vectors up to the sign (complex: phase) per
vector that defines them; failures give JAX's NaN, never a TF error; each graph pinned to its
kernels, with no loop."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose
from tests.tf_ops.plain.lowering_check import XLA_OP_PREFIXES, graph_op_types

RNG = np.random.RandomState(7)
LOOPS = {"While", "StatelessWhile"}
TOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


def _mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _random(shape, dtype):
    a = RNG.randn(*shape) + (1j * RNG.randn(*shape) if np.iscomplexobj(dtype(0)) else 0)
    return a.astype(dtype)


def _spd(batch, n, dtype):
    a = _random((batch, n, n), dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _plain(f, *args, polymorphic_shapes=None):
    """(tf.function of convert(f, enable_xla=False), the op types of its graph for `args`)."""
    fn = tf.function(jax2tf_native.convert(f, enable_xla=False,
                                           polymorphic_shapes=polymorphic_shapes),
                     autograph=False)
    specs = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in args]
    types = graph_op_types(fn.get_concrete_function(*specs))
    assert not [t for t in types if t.startswith(XLA_OP_PREFIXES)]
    return fn, types


def _aligned(got, want):
    """`got`'s columns times the unit phase that best matches `want`'s (a sign if real)."""
    got, want = np.asarray(got), np.asarray(want)
    phase = np.sum(np.conj(got) * want, axis=-2, keepdims=True)
    return got * phase / np.abs(phase)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
def test_cholesky_cho_solve_and_every_triangular_solve_equal_jax(dtype):
    def f(a, b):
        c = jnp.linalg.cholesky(a)
        out = [c, jsl.cho_solve((c, True), b), jsl.solve_triangular(_mH(c), b, lower=False)]
        out += [jsl.solve_triangular(c, b, lower=True, trans=t, unit_diagonal=u)
                for t in (0, 1, 2) for u in (False, True)]
        out += [jax.lax.linalg.triangular_solve(c, _mH(b), left_side=False, lower=True,
                                                transpose_a=t, conjugate_a=cj)
                for t, cj in ((False, False), (True, False), (True, True))]
        return out

    with jax.enable_x64(dtype == np.float64):
        a, b = _spd(3, 6, dtype), _random((3, 6, 2), dtype)
        fn, types = _plain(f, a, b)
        assert {"Cholesky", "MatrixTriangularSolve"} <= types and not types & LOOPS
        assert "SelfAdjointEigV2" not in types
        assert_tree_allclose(fn(a, b), jax.jit(f)(a, b), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype, lower", [(np.float32, True), (np.float32, False),
                                          (np.complex64, False), (np.float64, True)])
def test_eigh_equals_jax_up_to_each_vectors_sign(dtype, lower):
    """lax.linalg.eigh reads one triangle (lower=False: LAPACK's uplo 'U', TF's kernel gets
    the adjoint); the other holds garbage here. Eigenvalues ascending, as JAX's."""
    def f(a):
        return jax.lax.linalg.eigh(a, lower=lower, symmetrize_input=False)

    with jax.enable_x64(dtype == np.float64):
        h = _spd(4, 7, dtype) - 7 * np.eye(7, dtype=dtype)  # indefinite
        unread = np.tri(7, k=-1, dtype=bool)
        a = np.where(unread.T if lower else unread, dtype(50), h).astype(dtype)
        fn, types = _plain(f, a)
        assert "SelfAdjointEigV2" in types and not types & LOOPS
        (v, w), (v_want, w_want) = fn(a), jax.jit(f)(a)
        tol = 10 * TOL[dtype]
        np.testing.assert_allclose(w.numpy(), w_want, rtol=tol, atol=tol)
        assert np.all(np.diff(w.numpy(), axis=-1) >= 0)
        np.testing.assert_allclose(_aligned(v, v_want), v_want, rtol=tol, atol=tol)


def test_failures_give_jax_nan_never_a_tf_error():
    """Not positive definite, NaN and inf: JAX returns NaN for the failing matrix (LAPACK's
    info != 0); TF's Cholesky would fill NaN (0 for complex), its eigen solver raise."""
    def f(a, c):
        w, v = jnp.linalg.eigh(a)
        return (jnp.linalg.cholesky(a), w, v, jnp.linalg.cholesky(c),
                jnp.linalg.svd(a, compute_uv=False))

    a = np.stack([_spd(1, 4, np.float32)[0], -np.eye(4, dtype=np.float32),
                  np.full((4, 4), np.nan, np.float32), np.eye(4, dtype=np.float32)])
    a[3, 1, 2] = a[3, 2, 1] = np.inf
    c = np.stack([_spd(1, 4, np.complex64)[0], -np.eye(4, dtype=np.complex64)])
    fn, _ = _plain(f, a, c)
    got, want = fn(a, c), jax.jit(f)(a, c)
    chol, w, v, chol_c, s = (np.asarray(x) for x in want)
    assert np.isnan(chol[1:]).any(axis=(1, 2)).all() and np.isfinite(chol[0]).all()
    assert np.isnan(w[2:]).all() and np.isnan(chol_c[1]).any()
    assert_tree_allclose([got[0], got[1], got[3], got[4]], [chol, w, chol_c, s], rtol=1e-5,
                         atol=1e-5)
    np.testing.assert_allclose(_aligned(got[2], v)[:2], v[:2], rtol=1e-5, atol=1e-5)
    assert np.isnan(got[2].numpy()[2:]).all()


@pytest.mark.parametrize("shape, dtype, full_matrices", [((2, 5, 3), np.float32, True),
                                                         ((3, 4), np.float32, False),
                                                         ((2, 3, 3), np.complex64, True)])
def test_svd_equals_jax_up_to_each_pairs_sign(shape, dtype, full_matrices):
    def f(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=full_matrices)
        return u, s, vh, jnp.linalg.svd(a, compute_uv=False)

    a = _random(shape, dtype)
    fn, types = _plain(f, a)
    assert "Svd" in types and not types & LOOPS
    (u, s, vh, s_only), (u_want, s_want, vh_want, _) = fn(a), jax.jit(f)(a)
    np.testing.assert_allclose(s.numpy(), s_want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s_only.numpy(), s_want, rtol=1e-5, atol=1e-5)
    k = min(shape[-2:])
    # The first k columns of U and rows of VH come in pairs with one phase; the rest span the
    # same complement (full_matrices), checked by orthonormality.
    u_k = _aligned(u[..., :k], u_want[..., :k])
    np.testing.assert_allclose(u_k, u_want[..., :k], rtol=1e-4, atol=1e-4)
    phase = np.sum(np.conj(u[..., :k]) * u_want[..., :k], axis=-2)
    vh_k = vh.numpy()[..., :k, :] * np.conj(phase / np.abs(phase))[..., :, None]
    np.testing.assert_allclose(vh_k, vh_want[..., :k, :], rtol=1e-4, atol=1e-4)
    uu, vv = u.numpy(), vh.numpy()
    for gram in (np.conj(np.swapaxes(uu, -1, -2)) @ uu, vv @ np.conj(np.swapaxes(vv, -1, -2))):
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(gram.shape[-1]), gram.shape),
                                   atol=1e-5)


def test_symbolic_batch_and_size_in_a_graph_with_none_dimensions():
    def f(a):
        w, v = jnp.linalg.eigh(a)
        c = jnp.linalg.cholesky(a)
        return c, w, jsl.cho_solve((c, True), a), jnp.linalg.svd(a, compute_uv=False)

    converted = jax2tf_native.convert(f, enable_xla=False, polymorphic_shapes=["(b, n, n)"])
    fn = tf.function(converted, autograph=False,
                     input_signature=[tf.TensorSpec([None, None, None], tf.float32)])
    types = graph_op_types(fn.get_concrete_function())
    assert {"Cholesky", "MatrixTriangularSolve", "SelfAdjointEigV2", "Svd"} <= types
    assert not types & LOOPS
    for batch, n in ((2, 3), (5, 8)):
        a = _spd(batch, n, np.float32)
        assert_tree_allclose(fn(a), jax.jit(f)(a), rtol=2e-4, atol=2e-4)


def test_gradients_through_the_plain_kernels_equal_jax_grad():
    """tf.GradientTape on the enable_xla=False function vs jax.grad: the exported VJP modules run on the
    same kernels (a GP's log marginal likelihood, an eigen-solve, singular values)."""
    def loss(a, y):
        c = jnp.linalg.cholesky(a)
        alpha = jsl.cho_solve((c, True), y)
        logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(c, axis1=-2, axis2=-1)))
        w, v = jnp.linalg.eigh(a)
        eigen_solve = jnp.einsum("bij,bjk->bik", v, jnp.einsum("bji,bjk->bik", v, y)
                                 / w[..., None])
        s = jnp.linalg.svd(a[:, :3, :], compute_uv=False)
        return (jnp.sum(y * alpha) + logdet + jnp.sum(eigen_solve ** 2) + jnp.sum(w ** 2)
                + jnp.sum(s))

    a, y = _spd(2, 5, np.float32), _random((2, 5, 2), np.float32)
    converted = jax2tf_native.convert(loss, enable_xla=False)

    @tf.function(autograph=False)
    def grads(a, y):
        with tf.GradientTape() as tape:
            tape.watch([a, y])
            value = converted(a, y)
        return [value, *tape.gradient(value, [a, y])]

    a_tf, y_tf = tf.constant(a), tf.constant(y)
    types = graph_op_types(grads.get_concrete_function(a_tf, y_tf))
    assert {"Cholesky", "MatrixTriangularSolve", "SelfAdjointEigV2", "Svd"} <= types
    assert not types & LOOPS and not [t for t in types if t.startswith(XLA_OP_PREFIXES)]
    want = [jax.jit(loss)(a, y), *jax.jit(jax.grad(loss, argnums=(0, 1)))(a, y)]
    assert_tree_allclose(grads(a_tf, y_tf), want, rtol=1e-3, atol=1e-3)


def test_what_jax_cpu_lowering_refuses_runs_on_the_same_kernels():
    """eigh's subset_by_index and Jacobi algorithm, svd's subset_by_index and QR algorithm are
    not in JAX's CPU lowering: the plain export takes the full default decomposition (sliced),
    on the same kernels; eigenvalues and singular values equal LAPACK's (numpy's)."""
    def f(a):
        _, w = jax.lax.linalg.eigh(a, subset_by_index=(1, 3))
        _, w_jacobi = jax.lax.linalg.eigh(
            a, implementation=jax.lax.linalg.EighImplementation.JACOBI)
        s = jax.lax.linalg.svd(a, compute_uv=False, algorithm=jax.lax.linalg.SvdAlgorithm.QR)
        u, s_part, vh = jax.lax.linalg.svd(a, full_matrices=False, subset_by_index=(0, 2))
        return w, w_jacobi, s, s_part, (u * s_part[..., None, :]) @ vh

    a = _spd(2, 4, np.float32)
    fn, types = _plain(f, a)
    assert {"SelfAdjointEigV2", "Svd"} <= types and not types & LOOPS
    u, s, vh = np.linalg.svd(a)
    want = [np.linalg.eigvalsh(a)[..., 1:3], np.linalg.eigvalsh(a), s, s[..., :2],
            (u[..., :2] * s[..., None, :2]) @ vh[..., :2, :]]
    assert_tree_allclose(list(fn(a)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("file, kernel", [("cpu_cholesky_lapack_potrf", "Cholesky"),
                                          ("cpu_eigh_lapack_syev", "SelfAdjointEigV2"),
                                          ("cpu_svd_lapack_gesdd", "Svd"),
                                          ("cpu_triangular_solve_blas_trsm",
                                           "MatrixTriangularSolve")])
def test_jax_back_compat_artifacts_keep_their_lapack_calls_on_the_kernels(file, kernel):
    """JAX's own CPU artifacts (its back-compat data: modules, inputs and outputs recorded by
    JAX) through `call_exported(enable_xla=False)`: the LAPACK rewrite keeps the calls TF has
    kernels for, and the results pass JAX's back-compat checks (its tolerances; properties
    where the result is defined up to signs)."""
    from tests.jax2tf_native.linalg_isolated import lapack_rewrite_checks as back_compat
    with jax.enable_x64(True):  # float64 entries keep 64 bits
        for dtype in ("f32", "f64", "c64", "c128"):
            entry = back_compat._entry(file, dtype)
            fn = jax2tf_native.call_exported(back_compat._artifact(entry), with_gradient=False,
                                             enable_xla=False)
            assert fn.lapack_rewritten == ()
            inputs = [tf.constant(x) for x in entry["inputs"]]
            graph = tf.function(fn, autograph=False)
            types = graph_op_types(graph.get_concrete_function(*inputs))
            assert kernel in types and not types & LOOPS
            got = [np.asarray(o) for o in jax.tree.leaves(graph(*inputs))]
            want = list(entry["expected_outputs"])
            assert [g.dtype for g in got] == [w.dtype for w in want]
            back_compat._CHECKS[file](entry["inputs"], got, want, dtype)
