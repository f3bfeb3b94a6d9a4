"""jaxlib's LAPACK custom calls as TF's own linear-algebra kernels (plain TF ops, issue 36).

A CPU export for plain TF ops keeps JAX's CPU lowering of cholesky, triangular_solve, eigh and
svd (`jax2tf_native.linalg.plain_lowering_rules`): custom calls `lapack_<t><routine>_ffi`
(t in s, d, c, z) with one documented meaning each (LAPACK's, as jaxlib calls it: options in
`mhlo.backend_config` as one-byte LAPACK characters, an int32 `info` per matrix that JAX tests
against 0, replacing the results by NaN otherwise). Each becomes the TF kernel that computes
the same decomposition:

| target | TF op | conventions mapped |
|---|---|---|
| `potrf` | `Cholesky` | TF reads the lower triangle: uplo 'U' factors the adjoint and returns its adjoint; the other triangle of the result is the input's, as LAPACK leaves it; info = 0 iff every diagonal entry of the factor is > 0 (TF fills a failed real factor with NaN, a failed complex one with 0, and leaves the other triangle unset). |
| `trsm` | `MatrixTriangularSolve` | side, uplo, trans 'N'/'T'/'C', unit diagonal as StableHLO's `triangular_solve` (`linalg_ops.solve_triangular`). |
| `syevd`, `heevd` | `SelfAdjointEigV2` | TF reads the lower triangle (uplo 'U': the adjoint); eigenvalues ascending in both; a matrix with a non-finite entry in the read triangle, on which TF's kernel raises, is replaced by the identity and gets info = 1 (JAX then returns NaN). |
| `gesdd` | `Svd` | mode 'A'/'S'/'N' is full_matrices / compute_uv; TF returns V, LAPACK VT (its adjoint); singular values descending in both; a non-finite matrix (TF logs an error and returns NaN) is replaced by zeros and gets info = 1. |

Exactness (measured against `jax.jit` on CPU, tests/tf_ops/plain/test_lapack_kernels.py and
docs/linalg.md): factors, solutions, eigenvalues and singular values equal JAX's to rounding
(Eigen's blocked kernels against LAPACK's). Eigenvectors and singular vectors are defined only
up to a sign (a unit phase for complex) per vector, and for repeated values up to a rotation of
their space: LAPACK and Eigen choose differently, and no rule applied afterwards makes one
equal the other, so the contract is JAX's own: the same values and spaces, each vector equal up
to its sign. Where LAPACK's success depends on rounding (a matrix positive definite to within
rounding), `info` can differ from LAPACK's. `info` is 0 exactly when the kernel succeeded, else
1 (not LAPACK's index of the failing minor: JAX reads only whether it is 0). Eigen's eigen
solver could in principle fail to converge on a finite matrix (TF raises then; LAPACK would
return info > 0): not seen.

Why the kernels and not the portable algorithms: those become long chains of small TF ops and
`While` loops in a plain graph (9-41x the `XlaCallModule` graph on a GP posterior,
benchmarks/results/linalg_plain.md); recognizing them again after export would depend on how
each algorithm happens to be written, where a LAPACK call names its decomposition.
"""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from tf_ops.plain import linalg_ops
from tf_ops.plain.program import Op

_TARGET = re.compile(r"^lapack_([sdcz])(potrf|trsm|syevd|heevd|gesdd)_ffi$")
_ELEMENTS = {"s": "f32", "d": "f64", "c": "complex<f32>", "z": "complex<f64>"}
# Each routine's options: name -> (LAPACK's default, the characters it takes).
_OPTIONS = {
    "potrf": {"uplo": ("L", "LU")},
    "trsm": {"side": ("L", "LR"), "uplo": ("L", "LU"), "trans_x": ("N", "NTC"),
             "diag": ("N", "NU")},
    "syevd": {"mode": ("V", "VN"), "uplo": ("L", "LU")},
    "gesdd": {"mode": ("A", "ASN")},
}
_TRANSPOSE_MODES = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}
# The operands each routine reads (jaxlib's FFI kernels; shape operands aside).
_DATA_OPERANDS = {"potrf": 1, "trsm": 2, "syevd": 1, "gesdd": 1}


def _routine(op: Op) -> str:
    routine = _TARGET.match(op.attr("call_target_name")).group(2)
    return "syevd" if routine == "heevd" else routine


def _options(op: Op) -> dict[str, str]:
    config = op.attr("mhlo.backend_config")
    config = config if isinstance(config, dict) else {}
    return {name: chr(config[name]) if isinstance(config.get(name), int) else default
            for name, (default, _) in _OPTIONS[_routine(op)].items()}


def _data(op: Op, args) -> list:
    """The operands LAPACK reads: with symbolic shapes JAX appends the result shapes as extra
    operands (listed in `indices_of_shape_operands`), which TF's kernels do not need."""
    shape_operands = op.attr("indices_of_shape_operands")
    skip = set() if shape_operands is None else {int(i) for i in np.ravel(shape_operands)}
    return [a for i, a in enumerate(args) if i not in skip]


def _triangle(a, lower: bool):
    """The bool mask of a's `lower` (or upper) triangle, diagonal included, shape [n, n]."""
    n = a.shape[-1]
    if n is not None:
        mask = np.tri(n, dtype=bool)
        return tf.constant(mask if lower else mask.T)
    rows = tf.range(tf.shape(a)[-1])
    return (rows[:, None] >= rows[None, :]) if lower else (rows[:, None] <= rows[None, :])


def _finite(x):
    if x.dtype.is_complex:
        return tf.logical_and(tf.math.is_finite(tf.math.real(x)),
                              tf.math.is_finite(tf.math.imag(x)))
    return tf.math.is_finite(x)


def _all_finite(x):
    """Per matrix: whether every entry of x is finite."""
    return tf.reduce_all(_finite(x), axis=[-2, -1])


def _info(ok):
    return tf.cast(tf.logical_not(ok), tf.int32)


def _per_matrix(flag):
    return flag[..., None, None]


# ------------------------------------------------------------------------ potrf: Cholesky

def potrf(ctx, op: Op, *args):
    """(factor in the `uplo` triangle, the input's other triangle; info)."""
    (a,) = _data(op, args)
    lower = _options(op)["uplo"] == "L"
    # TF's kernel reads the lower triangle; the upper one of `a` is the lower one of a^H.
    factor = tf.linalg.cholesky(a if lower else tf.linalg.adjoint(a))
    diagonal = tf.linalg.diag_part(factor)
    if factor.dtype.is_complex:
        diagonal = tf.math.real(diagonal)
    ok = tf.reduce_all(diagonal > 0, axis=-1)  # False for NaN (real) and 0 (complex failure)
    if not lower:
        factor = tf.linalg.adjoint(factor)
    # A failed factorization leaves TF's other triangle unset: it is never read.
    return [tf.where(_triangle(a, lower), factor, a), _info(ok)]


# ------------------------------------------------------------------------ trsm: triangular solve

def trsm(ctx, op: Op, *args):
    """op(a) x = b (side 'L') or x op(a) = b (side 'R'), from a's `uplo` triangle."""
    a, b = _data(op, args)
    options = _options(op)
    return linalg_ops.solve_triangular(
        a, b, left_side=options["side"] == "L", lower=options["uplo"] == "L",
        mode=_TRANSPOSE_MODES[options["trans_x"]], unit_diagonal=options["diag"] == "U")


# ------------------------------------------------------------------------ syevd: eigh

def syevd(ctx, op: Op, *args):
    """(eigenvectors as columns, eigenvalues ascending, info)."""
    (a,) = _data(op, args)
    options = _options(op)
    lower = options["uplo"] == "L"
    m = a if lower else tf.linalg.adjoint(a)
    read = tf.where(_triangle(m, True), m, tf.zeros_like(m))
    if m.dtype.is_complex:
        # LAPACK takes the diagonal of a Hermitian matrix as real; so must TF's kernel.
        read = tf.linalg.set_diag(read, tf.cast(tf.math.real(tf.linalg.diag_part(read)),
                                                m.dtype))
    ok = _all_finite(read)
    # TF's kernel raises on a non-finite matrix ("not successful"); JAX's result is NaN.
    safe = tf.where(_per_matrix(ok), read, _identity_like(m))
    if options["mode"] == "N":
        # LAPACK leaves its workspace in the first result; JAX never reads it.
        return [tf.zeros_like(a), _real(tf.linalg.eigvalsh(safe)), _info(ok)]
    w, v = tf.linalg.eigh(safe)
    return [v, _real(w), _info(ok)]


def _real(x):
    """TF's eigenvalues and singular values of complex matrices are complex (imaginary part
    0); LAPACK's are real."""
    return tf.math.real(x) if x.dtype.is_complex else x


def _identity_like(m):
    n = m.shape[-1]
    if n is not None:
        return tf.constant(np.eye(n), m.dtype)
    return tf.eye(tf.shape(m)[-1], dtype=m.dtype)


# ------------------------------------------------------------------------ gesdd: svd

def gesdd(ctx, op: Op, *args):
    """(LAPACK's workspace, singular values descending, U, V^H, info)."""
    (a,) = _data(op, args)
    mode = _options(op)["mode"]
    ok = _all_finite(a)
    # TF's kernel logs an error and returns NaN on a non-finite matrix; JAX's result is NaN.
    safe = tf.where(_per_matrix(ok), a, tf.zeros_like(a))
    if mode == "N":
        s = _real(tf.linalg.svd(safe, compute_uv=False))
        u, vt = (_zeros_of(op.result_types[i], a) for i in (2, 3))
    else:
        s, u, v = tf.linalg.svd(safe, full_matrices=mode == "A", compute_uv=True)
        s, vt = _real(s), tf.linalg.adjoint(v)
    return [tf.zeros_like(a), s, u, vt, _info(ok)]


def _zeros_of(result_type, a):
    """Zeros of a result LAPACK leaves untouched (gesdd's U, VT in mode 'N'): JAX allocates
    them, full or reduced as the caller asked, and never reads them."""
    if result_type.is_static:
        return tf.zeros(result_type.shape, a.dtype)
    shape = tf.shape(a)
    k = tf.minimum(shape[-2], shape[-1])
    rows = shape[-2] if result_type.shape[-2] is None else result_type.shape[-2]
    cols = k if result_type.shape[-1] is None else result_type.shape[-1]
    return tf.zeros(tf.concat([shape[:-2], [rows, cols]], 0), a.dtype)


# ------------------------------------------------------------------------ checks and table

def check(op: Op):
    """Why a LAPACK call cannot be lowered exactly, or None."""
    target = op.attr("call_target_name")
    match = _TARGET.match(target)
    element = _ELEMENTS[match.group(1)]
    if op.operand_types[0].element != element:
        return f"{target} on {op.operand_types[0].element} (it is written for {element})"
    config = op.attr("mhlo.backend_config")
    if not isinstance(config, dict):
        return f"{target} without its options dict (an older jaxlib's kernel)"
    operands = len(_data(op, op.operand_types))
    if operands != _DATA_OPERANDS[_routine(op)]:
        return (f"{target} with {operands} operands (jaxlib's kernel takes "
                f"{_DATA_OPERANDS[_routine(op)]})")
    for name, (_, allowed) in _OPTIONS[_routine(op)].items():
        value = config.get(name)
        if value is not None and (not isinstance(value, int) or chr(value) not in allowed):
            return f"{target} with {name} {value!r} (LAPACK takes {', '.join(allowed)})"
    return None


_EMIT = {"potrf": potrf, "trsm": trsm, "syevd": syevd, "heevd": syevd, "gesdd": gesdd}

CUSTOM_CALLS = {f"lapack_{t}{routine}_ffi": (emit, check)
                for routine, emit in _EMIT.items() for t in "sdcz"
                if (routine != "heevd" or t in "cz") and (routine != "syevd" or t in "sd")}
# What an artifact's LAPACK rewrite leaves in place for plain graphs (jax2tf_native.lapack_rewrite).
TARGETS = frozenset(CUSTOM_CALLS)
