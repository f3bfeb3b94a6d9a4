"""StableHLO linear algebra in the plain lowering: `triangular_solve` (every side, triangle,
transpose and unit-diagonal choice) as the portable linear algebra exports it, and `cholesky`
against XLA itself running the same module (JAX's CPU export never writes the op: it calls
LAPACK), including matrices that are not positive definite."""
import dataclasses
import itertools

import jax
import numpy as np
import pytest
import tensorflow as tf
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_mlir

from jax2tf_native import linalg_portable
from tests.conftest import assert_tree_allclose
from tests.tf_ops.plain.lowering_check import XLA_OP_PREFIXES, graph_op_types
from tf_ops import plain

RNG = np.random.RandomState(0)


def _portable_program(f, *args):
    with linalg_portable.export_scope(platforms=("cpu",)) as extra:
        exported = jax.export.export(jax.jit(f), platforms=("cpu",), **extra)(*args)
    program = plain.read_program(exported.mlir_module())
    plain.check_program(program)
    return program


def _assert_runs_like(program, want, args, rtol, batch_none=True):
    want = list(jax.tree.leaves(want))
    tensors = [tf.constant(a) for a in args]
    assert_tree_allclose(plain.run_program(program, tensors), want, rtol=rtol, atol=rtol)
    signature = [tf.TensorSpec([None] * batch_none + list(a.shape[1:]), a.dtype) for a in args]
    fn = tf.function(lambda *xs: plain.run_program(program, list(xs)), autograph=False,
                     input_signature=signature)
    assert_tree_allclose(fn(*tensors), want, rtol=rtol, atol=rtol)
    assert not [t for t in graph_op_types(fn.get_concrete_function())
                if t.startswith(XLA_OP_PREFIXES)]


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_triangular_solve_every_variant(dtype):
    a = RNG.randn(2, 4, 4) + 4 * np.eye(4) + (1j * RNG.randn(2, 4, 4) if dtype == np.complex64
                                              else 0)
    a = a.astype(dtype)
    b_left, b_right = RNG.randn(2, 4, 3).astype(dtype), RNG.randn(2, 3, 4).astype(dtype)
    variants = list(itertools.product([True, False], [True, False], [False, True],
                                      [False, True], [False, True]))

    def solves(a, b_left, b_right):
        return [jax.lax.linalg.triangular_solve(
            a, b_left if left else b_right, left_side=left, lower=lower, transpose_a=trans,
            conjugate_a=conj, unit_diagonal=unit)
            for left, lower, trans, conj, unit in variants]

    program = _portable_program(solves, a, b_left, b_right)
    assert sum(op.name == "stablehlo.triangular_solve" for op in program.ops()) == len(variants)
    _assert_runs_like(program, jax.jit(solves)(a, b_left, b_right), [a, b_left, b_right],
                      rtol=1e-5)


def test_portable_solve_lowers():
    a = (RNG.randn(3, 4, 4) + 4 * np.eye(4)).astype(np.float32)
    b = RNG.randn(3, 4, 2).astype(np.float32)
    f = jax.numpy.linalg.solve
    _assert_runs_like(_portable_program(f, a, b), jax.jit(f)(a, b), [a, b], rtol=1e-4)


def _cholesky_module(element: str, lower: bool) -> str:
    t = f"tensor<2x5x5x{element}>"
    return (f"module @m {{ func.func public @main(%a: {t}) -> {t} {{ "
            f"%0 = stablehlo.cholesky %a, lower = {str(lower).lower()} : {t} "
            f"return %0 : {t} }} }}")


def _run_in_xla(module_text: str, arg: np.ndarray) -> np.ndarray:
    """XLA (JAX's CPU client) running `module_text`: an identity export with its module
    replaced, so XLA's own expansion of the op is the reference."""
    exported = jax.export.export(jax.jit(lambda x: x), platforms=["cpu"])(arg)
    with jax_mlir.make_ir_context():
        code = jax_mlir.module_to_bytecode(ir.Module.parse(module_text))
    return np.asarray(dataclasses.replace(exported, mlir_module_serialized=code).call(arg))


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_as_xla_including_failures(lower):
    with jax.enable_x64(True):
        for dtype, element in [(np.float32, "f32"), (np.complex128, "complex<f64>")]:
            a = RNG.randn(2, 5, 5) + (1j * RNG.randn(2, 5, 5) if dtype == np.complex128 else 0)
            a = a @ np.conj(np.swapaxes(a, -1, -2)) + 0.5 * np.eye(5)
            a[1] -= 30 * np.eye(5)  # not positive definite: XLA gives all NaN
            # The triangle StableHLO does not read holds garbage.
            unread = ~np.tri(5, dtype=bool) if lower else np.tri(5, k=-1, dtype=bool)
            a = np.where(unread, 100.0, a).astype(dtype)
            text = _cholesky_module(element, lower)
            want = _run_in_xla(text, a)
            assert np.isnan(want[1]).all() and np.isfinite(want[0]).all()
            program = plain.read_program(text)
            plain.check_program(program)
            _assert_runs_like(program, [want], [a], rtol=1e-5, batch_none=True)


def test_half_precision_linalg_is_refused():
    program = plain.read_program(_cholesky_module("f16", True))
    with pytest.raises(plain.PlainLoweringError, match="f16 linear algebra"):
        plain.check_program(program)


@pytest.mark.parametrize("dtype, shape", [(np.float32, (2, 5, 3)), (np.complex64, (4, 4)),
                                          (np.float32, (3, 5))])
def test_householder_custom_calls_follow_lapack(dtype, shape):
    from jax2tf_native._jax_internals import geqrf_p
    from tf_ops.plain import linalg_ops
    a = RNG.randn(*shape) + (1j * RNG.randn(*shape) if dtype == np.complex64 else 0)
    if shape == (4, 4):
        a[:, 1] = 0  # a zero column: tau 0, the reflector is the identity
    a = a.astype(dtype)
    m, n = shape[-2:]
    signature = [tf.TensorSpec([None] * (len(shape) - 2) + [m, n], dtype)]
    qr = tf.function(lambda x: linalg_ops.householder_qr(None, None, x), autograph=False,
                     input_signature=signature)
    packed, taus = qr(tf.constant(a))
    assert_tree_allclose([packed, taus], list(geqrf_p.bind(a)), rtol=1e-5, atol=1e-5)
    q_want, r_want = jax.numpy.linalg.qr(a)
    assert_tree_allclose(np.triu(packed.numpy())[..., :min(m, n), :], r_want, rtol=1e-5,
                         atol=1e-5)
    if m >= n:
        q = linalg_ops.householder_product(None, None, packed, taus)
        assert_tree_allclose(q, q_want, rtol=1e-5, atol=1e-5)


def test_portable_qr_svd_eigh_lower_through_the_householder_custom_calls():
    """The portable qr/svd/eigh write XLA's `Qr` and `ProductOfElementaryHouseholderReflectors`
    custom calls; as plain TF ops they follow LAPACK's conventions, so R, the singular values
    and the eigenvalues equal JAX's CPU results, and Q, U, V reconstruct the input."""
    jnp = jax.numpy
    a = RNG.randn(2, 5, 3).astype(np.float32)
    s = a[:, :3, :] @ np.swapaxes(a[:, :3, :], 1, 2) + np.eye(3, dtype=np.float32)

    def factor(a, s):
        q, r = jnp.linalg.qr(a)
        u, sv, vh = jnp.linalg.svd(a, full_matrices=False)
        w, v = jnp.linalg.eigh(s)
        return (q @ r, r, (u * sv[..., None, :]) @ vh, sv, w, v @ (w[..., None] * jnp.swapaxes(v, 1, 2)))

    program = _portable_program(factor, a, s)
    _, r_want, _, sv_want, w_want, _ = jax.jit(factor)(a, s)
    want = [a, r_want, a, sv_want, w_want, s]
    _assert_runs_like(program, want, [a, s], rtol=2e-4)


def test_portable_qr_of_a_1x1_matrix_in_a_graph():
    """A 1x1 QR's Householder loop keeps the static shapes it entered with (TF's while_loop
    refuses a carried value whose shape changes; found by the plain soak)."""
    a = np.array([[[-2.0]], [[3.0]]], np.float32)
    f = lambda a: jax.numpy.linalg.qr(a, mode="complete")
    _assert_runs_like(_portable_program(f, a), jax.jit(f)(a), [a], rtol=1e-6)
