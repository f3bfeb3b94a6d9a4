"""The programs we freeze as back-compat artifacts: one per CPU custom-call target our exports can
emit, and one per StableHLO-only program kind.

Each `ArtifactSpec` is a JAX function, inputs made from a fixed seed, and how to export it.
Functions return quantities that do not depend on arbitrary choices of the algorithm (e.g. |R|
and Q @ R instead of Q, sorted eigenvalues), so a later JAX or TF that picks other signs or orders
still matches the frozen outputs.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax



@dataclasses.dataclass(frozen=True)
class ArtifactSpec:
    """How to make one artifact.

    Attributes:
      name: directory name under tests/backcompat/data.
      description: one line: what program kind or custom-call target it freezes.
      fun: the JAX function; positional array arguments, returns an array or a tuple.
      make_inputs: returns the inputs (numpy arrays), deterministically.
      polymorphic_shapes: one `jax.export.symbolic_args_specs` shape string per input, or None
        for static shapes.
      make_bad_inputs: inputs that violate the symbolic shape constraints (must be rejected).
      rtol, atol: tolerance for comparing outputs with the frozen ones.
      requires_x64: export and run with `jax.enable_x64(True)` (float64/complex128 inputs).
      shardy: export with the Shardy partitioner (JAX's default); False writes `Sharding` custom
        calls.
      portable_linalg: export inside `jax2tf_native.linalg_portable.export_scope()`, as
        `convert(..., linalg="portable")` does: linear algebra becomes XLA's own `Qr`/`Eigh`
        custom calls, which TF runs, instead of LAPACK.
    """
    name: str
    description: str
    fun: Callable
    make_inputs: Callable[[], tuple[np.ndarray, ...]]
    polymorphic_shapes: tuple[str, ...] | None = None
    make_bad_inputs: Callable[[], tuple[np.ndarray, ...]] | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    requires_x64: bool = False
    shardy: bool = True
    portable_linalg: bool = False


def _rng(seed: int) -> np.random.RandomState:
    return np.random.RandomState(seed)


# --- StableHLO-only program kinds -------------------------------------------------------------

def _poly_batch(x, y):
    # x: (2*b, 3), y: (b, 3): JAX asserts at run time that x has twice y's rows.
    b = y.shape[0]
    pairs = x.reshape(b, 2, 3).sum(axis=1)
    return pairs * y, jnp.cumsum(y, axis=0), jnp.full((b,), x.shape[0], dtype=np.int32)


def _sort(keys, values):
    sorted_keys, sorted_values = lax.sort((keys, values), dimension=1, num_keys=1,
                                          is_stable=True)
    return sorted_keys, sorted_values, jnp.argsort(keys, axis=0, stable=True), jnp.sort(
        keys, axis=None, descending=True)


def _scan(xs):
    def step(carry, x):
        total, product = carry
        total = total + x
        product = product * (1 + 0.1 * x)
        return (total, product), total * product
    (total, product), ys = lax.scan(step, (jnp.zeros(3, xs.dtype), jnp.ones(3, xs.dtype)), xs)
    return total, product, ys, lax.cumsum(xs, axis=0, reverse=True)


def _while(n, x):
    # Data-dependent trip counts: Collatz steps per element, and Newton's square root.
    def collatz_steps(v):
        def cond(state):
            return state[0] != 1
        def body(state):
            value, steps = state
            return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1
        return lax.while_loop(cond, body, (v, jnp.int32(0)))[1]
    steps = jax.vmap(collatz_steps)(n)
    root = lax.fori_loop(0, 20, lambda _, r: 0.5 * (r + x / r), x)
    return steps, root


def _rng_bits(seed):
    key = jax.random.key(seed[0], impl="threefry2x32")
    bits = jax.random.bits(key, (4, 5), dtype=np.uint32)
    normal = jax.random.normal(jax.random.fold_in(key, 1), (6,), dtype=np.float32)
    raw_key = jnp.concatenate([seed, seed * np.uint32(7919) + np.uint32(1)])
    k1, threefry = lax.rng_bit_generator(raw_key, (3, 4), dtype=np.uint32,
                                         algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    k2, philox = lax.rng_bit_generator(raw_key, (5,), dtype=np.uint32,
                                       algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    return bits, normal, k1, threefry, k2, philox


def _reductions(x, mask):
    return (x.sum(axis=(0, 2)), x.prod(axis=1), x.max(axis=2), x.min(), jnp.argmax(x, axis=1),
            jnp.argmin(x, axis=0), x.mean(axis=0), x.var(axis=2),
            jax.nn.logsumexp(x, axis=1), jnp.any(mask, axis=0), jnp.all(mask, axis=1),
            lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2), (1, 1, 2), "SAME"))


def _convolution(images, kernel):
    # NHWC images, HWIO kernel with 2 feature groups, stride, dilation and explicit padding.
    out = lax.conv_general_dilated(
        images, kernel, window_strides=(2, 1), padding=((1, 1), (2, 0)),
        lhs_dilation=(1, 1), rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=2)
    transposed = lax.conv_transpose(images[..., :2], kernel[..., :2, :3], strides=(2, 2),
                                    padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return out, transposed


def _top_k(x):
    values, indices = lax.top_k(x, 3)
    return values, indices


def _fft(x, y):
    c = x + 1j * y
    return (jnp.fft.fft(c), jnp.fft.ifft(c, axis=0), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(
        y), n=y.shape[-1]), jnp.fft.fft2(c))


# --- platform-independent custom calls --------------------------------------------------------

def _dynamic_top_k(x):
    # k = b // 2 is symbolic, so JAX writes stablehlo.dynamic_top_k.
    return lax.top_k(x, x.shape[-1] // 2)


def _dynamic_rng_bit_generator(key, x):
    _, bits = lax.rng_bit_generator(key, (x.shape[0], 3), dtype=np.uint32,
                                    algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    return bits


def _dynamic_reduce_window(x):
    # Window and padding depend on the symbolic length: a cumulative max.
    n = x.shape[0]
    return lax.reduce_window(x, -jnp.inf, lax.max, (n,), (1,), [(n - 1, 0)])


def _dynamic_approx_top_k(x):
    values, indices = lax.approx_max_k(x, x.shape[0])
    return values, indices


def _approx_top_k(x):
    return lax.approx_max_k(x, 3, recall_target=1.0)


def _sharding_constraint(x):
    mesh = jax.make_mesh((1,), ("a",), axis_types=(jax.sharding.AxisType.Auto,))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("a"))
    return jax.lax.with_sharding_constraint(x * 2, spec) + 1


def _memory_kind_placement(x):
    # With an Auto mesh JAX 0.10 drops the placement; the default (Explicit) mesh keeps it.
    mesh = jax.make_mesh((1,), ("a",))
    host = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind="pinned_host")
    return jax.device_put(x * 2, host) + 1


def _portable_qr(a):
    q, r = jnp.linalg.qr(a)
    return q @ r, jnp.abs(r), q.T @ q


def _portable_eigh(a):
    w, v = jnp.linalg.eigh(a)
    return w, (v * w) @ v.T, jnp.abs(v)


# --- LAPACK custom calls (CPU), all four dtypes in one artifact -------------------------------

_LAPACK_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _random_matrix(rng, shape, dtype):
    a = rng.randn(*shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.randn(*shape)
    return a.astype(dtype)


def _hermitian_pd(rng, n, dtype):
    a = _random_matrix(rng, (n, n), dtype)
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def _per_dtype(make_one: Callable[[np.random.RandomState, type], tuple[np.ndarray, ...]]):
    def make():
        rng = _rng(0)
        return tuple(x for dtype in _LAPACK_DTYPES for x in make_one(rng, dtype))
    return make


def _on_each(fn: Callable, arity: int):
    """Applies `fn` to each dtype's group of `arity` inputs and concatenates the outputs."""
    def apply(*args):
        outs = []
        for i in range(0, len(args), arity):
            res = fn(*args[i:i + arity])
            outs.extend(res if isinstance(res, tuple) else (res,))
        return tuple(outs)
    return apply


def _sorted_complex(w):
    return jnp.sort(w.astype(jnp.result_type(w.dtype, np.complex64)))


def _cholesky(a):
    return jnp.linalg.cholesky(a)


def _lapack_qr(a):
    q, r = jnp.linalg.qr(a)
    return q @ r, jnp.abs(r)


def _lapack_eigh(a):
    w, v = jnp.linalg.eigh(a)
    return w, (v * w) @ v.conj().T


def _lapack_eig(a):
    w, v = jnp.linalg.eig(a)
    residual = jnp.linalg.norm(a.astype(v.dtype) @ v - v * w) / jnp.linalg.norm(a)
    return _sorted_complex(w), residual


def _lapack_svd(a):
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    return s, (u * s) @ vh


def _lapack_lu(a):
    lu, piv = jax.scipy.linalg.lu_factor(a)
    return lu, piv


def _lapack_tridiagonal(a):
    _, d, e, _ = lax.linalg.tridiagonal(a, lower=True)
    return d, jnp.abs(e)


def _lapack_hessenberg(a):
    h, _ = lax.linalg.hessenberg(a)
    # Only the Hessenberg part is the result; below it LAPACK stores reflectors.
    return jnp.abs(jnp.triu(h, k=-1))


def _lapack_schur(a):
    t, z = jax.scipy.linalg.schur(a)
    return _sorted_complex(jnp.diagonal(t)), z @ t @ z.conj().T


def _lapack_triangular_solve(a, b):
    return jax.scipy.linalg.solve_triangular(a, b, lower=True)


def _lapack_tridiagonal_solve(dl, d, du, b):
    return lax.linalg.tridiagonal_solve(dl, d, du, b)


def _tridiagonal_inputs(rng, dtype):
    n = 5
    dl = _random_matrix(rng, (n,), dtype)
    du = _random_matrix(rng, (n,), dtype)
    dl[0] = 0
    du[-1] = 0
    d = (_random_matrix(rng, (n,), dtype) + 6).astype(dtype)  # diagonally dominant
    return dl, d, du, _random_matrix(rng, (n, 2), dtype)


def _lower_triangular(rng, dtype):
    a = np.tril(_random_matrix(rng, (4, 4), dtype)) + 4 * np.eye(4)
    return a.astype(dtype), _random_matrix(rng, (4, 3), dtype)


def _schur_input(rng, dtype):
    # Real eigenvalues (similar to a triangular matrix), so the real Schur form is triangular
    # and its diagonal is the eigenvalues.
    t = np.triu(_random_matrix(rng, (4, 4), dtype)) + np.diag(np.arange(1, 5))
    q, _ = np.linalg.qr(_random_matrix(rng, (4, 4), dtype))
    return ((q @ t @ q.conj().T).astype(dtype),)


_LAPACK_SPECS = (
    ("cholesky", "potrf", _cholesky, 1, lambda rng, dt: (_hermitian_pd(rng, 4, dt),)),
    ("qr", "geqrf, orgqr/ungqr", _lapack_qr, 1,
     lambda rng, dt: (_random_matrix(rng, (5, 3), dt),)),
    ("eigh", "syevd/heevd", _lapack_eigh, 1, lambda rng, dt: (_hermitian_pd(rng, 4, dt),)),
    ("eig", "geev", _lapack_eig, 1, lambda rng, dt: (_random_matrix(rng, (4, 4), dt),)),
    ("svd", "gesdd", _lapack_svd, 1, lambda rng, dt: (_random_matrix(rng, (5, 3), dt),)),
    ("lu", "getrf", _lapack_lu, 1, lambda rng, dt: (_random_matrix(rng, (4, 4), dt),)),
    ("tridiagonal", "sytrd/hetrd", _lapack_tridiagonal, 1,
     lambda rng, dt: (_hermitian_pd(rng, 4, dt),)),
    ("hessenberg", "gehrd", _lapack_hessenberg, 1,
     lambda rng, dt: (_random_matrix(rng, (4, 4), dt),)),
    ("schur", "gees", _lapack_schur, 1, _schur_input),
    ("triangular_solve", "trsm", _lapack_triangular_solve, 2, _lower_triangular),
    ("tridiagonal_solve", "gtsv", _lapack_tridiagonal_solve, 4, _tridiagonal_inputs),
)

_LAPACK_ARTIFACTS = tuple(
    ArtifactSpec(
        name=f"cpu_lapack_{op}",
        description=f"lapack_*{kernels}_ffi (float32, float64, complex64, complex128) from "
                    f"{fn.__name__.lstrip('_').replace('lapack_', '')}; runs in TF through "
                    f"call_exported's LAPACK rewrite (frozen as 'runs in JAX only')",
        fun=_on_each(fn, arity), make_inputs=_per_dtype(make_one),
        rtol=1e-4, atol=1e-4, requires_x64=True)
    for op, kernels, fn, arity, make_one in _LAPACK_SPECS)


def _lapack_poly_batch(a, b):
    # Two getrf calls and one potrf around a symbolic batch: the rewrite must handle `?` dims,
    # JAX's shape operands, and share one portable function between calls of the same type.
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    x1 = jnp.linalg.solve(a, b)
    x2 = jnp.linalg.solve(a + 2 * eye, b)
    return x1, x2, jnp.linalg.cholesky(a @ jnp.swapaxes(a, -1, -2) + 4 * eye)


def _f32(*shape, seed=0, scale=1.0):
    return (_rng(seed).randn(*shape) * scale).astype(np.float32)


ARTIFACTS: tuple[ArtifactSpec, ...] = (
    # StableHLO-only program kinds.
    ArtifactSpec("poly_batch_shape_assertions",
                 "symbolic batch b with inputs (2*b, 3) and (b, 3): shape_assertion checks",
                 _poly_batch, lambda: (_f32(8, 3), _f32(4, 3, seed=1)),
                 polymorphic_shapes=("(2*b, 3)", "(b, 3)"),
                 make_bad_inputs=lambda: (_f32(6, 3), _f32(4, 3, seed=1))),
    ArtifactSpec("stablehlo_sort", "multi-operand stable sort, argsort, descending flat sort",
                 _sort, lambda: (np.round(_f32(4, 6) * 2), np.arange(24, dtype=np.int32
                                                                     ).reshape(4, 6))),
    ArtifactSpec("stablehlo_scan", "lax.scan with a tuple carry, reverse cumsum", _scan,
                 lambda: (_f32(7, 3),), rtol=1e-5, atol=1e-5),
    ArtifactSpec("stablehlo_while", "while_loop with data-dependent trip count, fori_loop",
                 _while, lambda: (np.array([1, 6, 7, 27], np.int32),
                                  np.array([2.0, 9.0, 0.25, 1e4], np.float32))),
    ArtifactSpec("stablehlo_rng_bits",
                 "threefry jax.random.bits/normal, rng_bit_generator THREE_FRY and PHILOX",
                 _rng_bits, lambda: (np.array([42, 7], np.uint32),)),
    ArtifactSpec("stablehlo_reductions",
                 "sum/prod/max/min/argmax/argmin/mean/var/logsumexp/any/all, reduce_window",
                 _reductions, lambda: (_f32(3, 4, 5), _f32(3, 4, seed=2) > 0), rtol=1e-5,
                 atol=1e-5),
    ArtifactSpec("stablehlo_convolution",
                 "conv_general_dilated (strides, padding, dilation, feature groups), "
                 "conv_transpose", _convolution, lambda: (_f32(2, 6, 7, 4), _f32(3, 2, 2, 6, seed=1)),
                 rtol=1e-4, atol=1e-4),
    ArtifactSpec("stablehlo_top_k", "lax.top_k with ties", _top_k,
                 lambda: (np.round(_f32(3, 8) * 2),)),
    ArtifactSpec("stablehlo_fft", "fft, ifft, rfft, irfft, fft2", _fft,
                 lambda: (_f32(4, 8), _f32(4, 8, seed=1)), rtol=1e-4, atol=1e-4),
    # Platform-independent custom calls.
    ArtifactSpec("stablehlo_dynamic_top_k", "stablehlo.dynamic_top_k: top_k with k = b // 2",
                 _dynamic_top_k, lambda: (np.round(_f32(3, 8) * 2),),
                 polymorphic_shapes=("(3, b)",)),
    ArtifactSpec("stablehlo_dynamic_rng_bit_generator",
                 "stablehlo.dynamic_rng_bit_generator: output shape (b, 3)",
                 _dynamic_rng_bit_generator,
                 lambda: (np.array([1, 2, 3, 4], np.uint32), _f32(5)),
                 polymorphic_shapes=("(4,)", "(b,)")),
    ArtifactSpec("stablehlo_dynamic_reduce_window",
                 "stablehlo.dynamic_reduce_window: cumulative max, window = b",
                 _dynamic_reduce_window, lambda: (_f32(9),), polymorphic_shapes=("(b,)",)),
    ArtifactSpec("stablehlo_dynamic_approx_top_k",
                 "stablehlo.dynamic_approx_top_k: approx_max_k with k = b",
                 _dynamic_approx_top_k, lambda: (_f32(7),), polymorphic_shapes=("(b,)",)),
    ArtifactSpec("approx_top_k", "ApproxTopK: approx_max_k with static k, recall 1.0",
                 _approx_top_k, lambda: (_f32(2, 10),)),
    ArtifactSpec("sharding_constraint", "Sharding: with_sharding_constraint, Shardy disabled",
                 _sharding_constraint, lambda: (_f32(4, 3),), shardy=False),
    ArtifactSpec("memory_kind_placement",
                 "annotate_device_placement: device_put to pinned_host inside jit; JAX only",
                 _memory_kind_placement, lambda: (_f32(4, 3),)),
    ArtifactSpec("cpu_xla_qr", "Qr and ProductOfElementaryHouseholderReflectors on CPU: "
                 "jnp.linalg.qr with portable linalg", _portable_qr, lambda: (_f32(5, 3),),
                 rtol=1e-4, atol=1e-4, portable_linalg=True),
    ArtifactSpec("cpu_xla_eigh", "Eigh on CPU: jnp.linalg.eigh with portable linalg",
                 _portable_eigh,
                 lambda: ((lambda a: (a @ a.T + 4 * np.eye(4)).astype(np.float32))(_f32(4, 4)),),
                 rtol=1e-4, atol=1e-4, portable_linalg=True),
    *_LAPACK_ARTIFACTS,
    ArtifactSpec("cpu_lapack_poly_batch",
                 "lapack_sgetrf_ffi and lapack_strsm_ffi twice, lapack_spotrf_ffi, with a "
                 "symbolic batch b; runs in TF through call_exported's LAPACK rewrite",
                 _lapack_poly_batch,
                 lambda: (_f32(3, 4, 4) + 3 * np.eye(4, dtype=np.float32), _f32(3, 4, 2, seed=1)),
                 polymorphic_shapes=("(b, 4, 4)", "(b, 4, 2)"), rtol=1e-4, atol=1e-4),
)

ARTIFACTS_BY_NAME = {spec.name: spec for spec in ARTIFACTS}


def select(names: Sequence[str] | None) -> tuple[ArtifactSpec, ...]:
    """The specs named in `names` (all when None); unknown names raise, listing the known ones."""
    if not names:
        return ARTIFACTS
    unknown = [n for n in names if n not in ARTIFACTS_BY_NAME]
    if unknown:
        raise ValueError(f"unknown artifact name(s) {unknown}. Known: "
                         f"{', '.join(sorted(ARTIFACTS_BY_NAME))}.")
    return tuple(ARTIFACTS_BY_NAME[n] for n in names)
