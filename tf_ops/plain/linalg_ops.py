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
    return solve_triangular(a, b, left_side=bool(op.attr("left_side")),
                            lower=bool(op.attr("lower")),
                            mode=op.attr("transpose_a", "NO_TRANSPOSE"),
                            unit_diagonal=bool(op.attr("unit_diagonal")))


def solve_triangular(a, b, *, left_side: bool, lower: bool, mode: str, unit_diagonal: bool):
    """StableHLO's `triangular_solve` (mode NO_TRANSPOSE, TRANSPOSE or ADJOINT) with TF's
    `MatrixTriangularSolve`; also LAPACK's trsm (`tf_ops.plain.lapack_kernels`)."""
    if unit_diagonal:
        a = tf.linalg.set_diag(a, tf.ones_like(tf.linalg.diag_part(a)))
    if left_side:
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


# ------------------------------------------------------------------------ Householder QR
# The custom calls "Qr" and "ProductOfElementaryHouseholderReflectors" that JAX's portable
# (non-LAPACK) QR writes are XLA's own `QrExpander` kernels: LAPACK's geqrf/orgqr conventions
# (A = Q R; R on and above the diagonal, Householder vectors with an implicit unit head below
# it, H_j = I - tau_j v_j v_j^H, Q = H_0 H_1 ... H_(p-1)). Written here as XLA's unblocked
# loops (it blocks by 128 columns, which changes rounding only). The custom-call lowering
# (control_flow.custom_call) dispatches these targets through `CUSTOM_CALLS`.

def _norm(parts):
    """sqrt(sum(x^2)) scaled by the largest |x| against overflow, as XLA's `Norm`."""
    parts = [tf.abs(p) for p in parts]
    w = parts[0]
    for p in parts[1:]:
        w = tf.maximum(w, p)
    safe_w = tf.where(tf.equal(w, 0), tf.ones_like(w), w)
    total = tf.add_n([tf.square(p / safe_w) for p in parts])
    return tf.where(tf.equal(w, 0), tf.zeros_like(w), w * tf.sqrt(total))


def _house(x, j, rows):
    """XLA's `House`: v (unit at j, zero above), tau and beta with H x = (x[:j], beta, 0...)."""
    alpha = tf.gather(x, j, axis=-1)
    after = tf.where(rows > j, x, tf.zeros_like(x))
    sigma = tf.reduce_sum(tf.math.real(after * tf.math.conj(after)), axis=-1)
    re, im = tf.math.real(alpha), tf.math.imag(alpha)
    if x.dtype.is_complex:
        mu = _norm([re, im, tf.sqrt(sigma)])
        sigma_zero = tf.logical_and(tf.equal(sigma, 0), tf.equal(im, 0))
    else:
        mu = _norm([alpha, tf.sqrt(sigma)])
        sigma_zero = tf.equal(sigma, 0)
    beta = tf.where(re < 0, tf.ones_like(mu), -tf.ones_like(mu)) * mu
    beta = tf.where(sigma_zero, re, beta)
    if x.dtype.is_complex:
        tau = tf.complex((beta - re) / beta, -im / beta)
    else:
        tau = (beta - alpha) / beta
    tau = tf.where(sigma_zero, tf.zeros_like(tau), tau)
    beta_x = tf.complex(beta, tf.zeros_like(beta)) if x.dtype.is_complex else beta
    divisor = tf.where(sigma_zero, tf.ones_like(alpha), alpha - beta_x)
    v = tf.cast(tf.equal(rows, j), x.dtype) + after / divisor[..., None]
    return v, tau, beta_x


def householder_qr(ctx, op: Op, a):
    """Custom call "Qr": (R and the Householder vectors packed in a, taus)."""
    m, n = tf.shape(a)[-2], tf.shape(a)[-1]
    p = tf.minimum(m, n)
    rows, cols = tf.range(m), tf.range(n)

    def body(j, a, taus):
        a_in = a
        x = tf.gather(a, j, axis=-1)
        v, tau, beta = _house(x, j, rows)
        right = tf.where(cols > j, a, tf.zeros_like(a))
        vva = tf.linalg.matvec(right, tf.math.conj(v), adjoint_a=False, transpose_a=True)
        a = a - tf.math.conj(tau)[..., None, None] * (v[..., :, None] * vva[..., None, :])
        new_x = tf.where(rows < j, x, tf.where(tf.equal(rows, j), beta[..., None] *
                                                 tf.ones_like(x), v))
        a = tf.where(tf.equal(cols, j), new_x[..., :, None], a)
        new_taus = tf.where(tf.equal(tf.range(p), j), tau[..., None], taus)
        # The loop keeps the static shapes it entered with (tf.range(p) hides them).
        new_taus.set_shape(taus.shape)
        a.set_shape(a_in.shape)
        return j + 1, a, new_taus

    taus0 = tf.zeros(tf.concat([tf.shape(a)[:-2], [p]], 0), a.dtype)
    _, a, taus = tf.while_loop(lambda j, *_: j < p, body, [tf.constant(0), a, taus0],
                               parallel_iterations=1)
    return [a, taus]


def householder_product(ctx, op: Op, a, taus):
    """Custom call "ProductOfElementaryHouseholderReflectors": the first n columns of
    H_0 ... H_(p-1), H_j = I - taus[j] v_j v_j^H, v_j read from column j of a below row j."""
    m, n, p = tf.shape(a)[-2], tf.shape(a)[-1], tf.shape(taus)[-1]
    rows = tf.range(m)
    batch = tf.shape(a)[:-2]
    q = tf.eye(m, n, batch_shape=batch, dtype=a.dtype) if a.shape.rank > 2 else \
        tf.eye(m, n, dtype=a.dtype)

    def body(j, q):
        column = tf.gather(a, j, axis=-1)
        v = tf.where(rows > j, column, tf.cast(tf.equal(rows, j), a.dtype))
        tau = tf.gather(taus, j, axis=-1)
        vq = tf.linalg.matvec(q, tf.math.conj(v), transpose_a=True)  # v^H q
        new_q = q - tau[..., None, None] * (v[..., :, None] * vq[..., None, :])
        new_q.set_shape(q.shape)
        return j - 1, new_q

    _, q = tf.while_loop(lambda j, _: j >= 0, body, [p - 1, q], parallel_iterations=1)
    return q


def check_householder(op: Op):
    return _check_types(op)


CUSTOM_CALLS = {
    "Qr": (householder_qr, check_householder),
    "ProductOfElementaryHouseholderReflectors": (householder_product, check_householder),
}
