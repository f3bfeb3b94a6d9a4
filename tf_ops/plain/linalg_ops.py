"""StableHLO's linear-algebra ops (`triangular_solve`, `cholesky`) as TF ops.

- `triangular_solve`: TF's `MatrixTriangularSolve` solves `a x = b` from one triangle of `a`
  (the other is never read, as in StableHLO), with `adjoint` for `a^H x = b`. StableHLO's
  right-side solves (`x op(a) = b`) are the left-side solve of the transposed system;
  TRANSPOSE of a complex `a` is `conj(a^H)`, so it solves `a^H conj(x) = conj(b)`; a unit
  diagonal replaces `a`'s diagonal by ones.
- `cholesky`: XLA's own loop over columns (its `CholeskyExpander`) in plain TF ops rather
  than TF's `Cholesky` kernel, which raises at run time on a matrix that is not positive
  definite where XLA returns a matrix of NaN. Only the chosen triangle of the input is read;
  the other triangle of the result is zero. (XLA blocks matrices over 128 columns; the
  unblocked loop differs from it by rounding only.)

float16/bfloat16 are refused: XLA solves and factors them in their own precision (its
expanders), TF has no kernels for them, and a float32 detour rounds differently.
"""
from __future__ import annotations

import tensorflow as tf

from tf_ops.plain.program import Op

_TF_LINALG_TYPES = ("f32", "f64", "complex<f32>", "complex<f64>")


def _check_types(op: Op):
    for t in op.operand_types:
        if t.element not in _TF_LINALG_TYPES:
            return (f"{t.element} linear algebra (XLA computes it in {t.element}; TF's kernels "
                    f"take only float32/64 and complex64/128)")
    return None


# ------------------------------------------------------------------------ triangular_solve

def _transpose(x):
    return tf.linalg.matrix_transpose(x)


def _solve_left(a, b, lower: bool, mode: str):
    """op(a) x = b for op in NO_TRANSPOSE, TRANSPOSE, ADJOINT, from a's `lower` triangle."""
    if mode == "NO_TRANSPOSE":
        return tf.linalg.triangular_solve(a, b, lower=lower, adjoint=False)
    if mode == "ADJOINT" or not a.dtype.is_complex:
        return tf.linalg.triangular_solve(a, b, lower=lower, adjoint=True)
    # a^T x = b  <=>  a^H conj(x) = conj(b)
    return tf.math.conj(tf.linalg.triangular_solve(a, tf.math.conj(b), lower=lower,
                                                   adjoint=True))


def triangular_solve(ctx, op: Op, a, b):
    lower = bool(op.attr("lower"))
    mode = op.attr("transpose_a", "NO_TRANSPOSE")
    if op.attr("unit_diagonal"):
        a = tf.linalg.set_diag(a, tf.ones_like(tf.linalg.diag_part(a)))
    if op.attr("left_side"):
        return _solve_left(a, b, lower, mode)
    # x op(a) = b  <=>  op(a)^T x^T = b^T, and op(a)^T is a^T, a, or conj(a).
    if mode == "NO_TRANSPOSE":
        return _transpose(_solve_left(a, _transpose(b), lower, "TRANSPOSE"))
    if mode == "TRANSPOSE" or not a.dtype.is_complex:
        return _transpose(_solve_left(a, _transpose(b), lower, "NO_TRANSPOSE"))
    # conj(a) y = b^T  <=>  a conj(y) = conj(b^T)
    return _transpose(tf.math.conj(_solve_left(a, tf.math.conj(_transpose(b)), lower,
                                               "NO_TRANSPOSE")))


def check_triangular_solve(op: Op):
    why = _check_types(op)
    if why:
        return why
    if op.attr("transpose_a", "NO_TRANSPOSE") not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        return f"transpose_a {op.attr('transpose_a')}"
    return None


# ------------------------------------------------------------------------ cholesky

def cholesky(ctx, op: Op, a):
    """XLA's unblocked Cholesky-Banachiewicz loop: column j of L is c / sqrt(re c[j]) on and
    below the diagonal, c = a[:, j] - L L[j, :]^H; a NaN square root anywhere makes the
    whole matrix NaN (XLA's `seen_error`)."""
    lower = bool(op.attr("lower", False))
    # XLA factors the transpose for an upper factor and transposes back (no conjugation).
    m = a if lower else tf.linalg.matrix_transpose(a)
    n = tf.shape(m)[-1]
    index = tf.range(n)
    real_dtype = m.dtype.real_dtype

    def body(j, l, error):
        row = tf.gather(l, j, axis=-2)                   # L[j, :]: zero from column j on
        column = tf.gather(m, j, axis=-1) - tf.linalg.matvec(l, tf.math.conj(row))
        root = tf.sqrt(tf.math.real(tf.gather(column, j, axis=-1)))
        error = tf.logical_or(error, tf.math.is_nan(root))
        root = tf.complex(root, tf.zeros_like(root)) if m.dtype.is_complex else root
        new = tf.where(index >= j, column / root[..., None], tf.zeros_like(column))
        l = tf.where(tf.equal(index, j), new[..., :, None], l)  # column j of L
        return j + 1, l, error

    error0 = tf.zeros(tf.shape(m)[:-2], tf.bool)
    _, l, error = tf.while_loop(lambda j, *_: j < n, body,
                                [tf.constant(0), tf.zeros_like(m), error0],
                                parallel_iterations=1)
    nan = tf.constant(float("nan"), real_dtype)
    nan = tf.complex(nan, tf.zeros_like(nan)) if m.dtype.is_complex else nan
    l = tf.where(error[..., None, None], tf.fill(tf.shape(l), nan), l)
    return l if lower else tf.linalg.matrix_transpose(l)


def check_cholesky(op: Op):
    return _check_types(op)
