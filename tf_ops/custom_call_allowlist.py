"""The custom-call targets jax2tf-native guarantees: the one place that lists them.

A `stablehlo.custom_call` is an opaque call into code that lives outside StableHLO, so a
serialized module that contains one is only as stable as that code. JAX guarantees a fixed set of
targets (its "stable list"); we take exactly that set, and add for each target what a TensorFlow
consumer needs to know: on which platforms JAX puts it in a module, which JAX operation does, and
on which platforms TensorFlow's own XLA can execute it. TF links its own copy of XLA, without the
FFI handlers that jaxlib registers (LAPACK, cuSOLVER, ...), so "stable in JAX" does not imply
"runnable in TF".

Claims marked "verified" in a `note` were checked on this project's CPU host (TF 2.21, JAX 0.10.2)
by running a module containing the target through `XlaCallModule`, eagerly and with
`jit_compile=True`; the back-compat artifacts in tests/backcompat/data keep checking them. Claims
about GPU/TPU could not be run here and say where they come from.

Example:
    >>> entry = ALLOWLIST_BY_TARGET["Qr"]
    >>> entry.tf_runnable_platforms
    ('cpu', 'tpu')
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from tf_ops.platforms import JAX_PLATFORMS as ALL_PLATFORMS


@dataclasses.dataclass(frozen=True)
class AllowedTarget:
    """One custom-call target that may appear in a module we export.

    Attributes:
      target: the `call_target_name` of the `stablehlo.custom_call`.
      platforms: the lowering platforms for which a module can contain this target (JAX spelling:
        "cpu", "cuda", "rocm", "tpu"). A platform-independent target lists all four.
      emitted_by: the JAX operation(s) whose lowering emits it, e.g. "jnp.linalg.qr".
      tf_runnable_platforms: the platforms on which TensorFlow's XLA can execute it; a subset of
        `platforms` or wider (e.g. `Qr` is emitted by JAX's TPU rule but also runs on CPU).
      note: where the runnable claim comes from, and anything a user must know.
    """
    target: str
    platforms: tuple[str, ...]
    emitted_by: str
    tf_runnable_platforms: tuple[str, ...]
    note: str = ""

    def runs_in_tf_on(self, platform: str) -> bool:
        """True when TF's XLA can execute this target on `platform`."""
        return platform in self.tf_runnable_platforms


# The LAPACK kernels that jaxlib registers with JAX's XLA on CPU, by operation. One target per
# dtype prefix (s, d, c, z), in JAX's naming: complex variants of orgqr/syevd/sytrd are
# ungqr/heevd/hetrd.
_LAPACK_OPS: tuple[tuple[tuple[str, str, str, str], str], ...] = (
    (("spotrf", "dpotrf", "cpotrf", "zpotrf"), "jnp.linalg.cholesky (lax.linalg.cholesky)"),
    (("sgeqrf", "dgeqrf", "cgeqrf", "zgeqrf"), "jnp.linalg.qr (lax.linalg.geqrf)"),
    (("sorgqr", "dorgqr", "cungqr", "zungqr"), "jnp.linalg.qr (lax.linalg.householder_product)"),
    (("ssyevd", "dsyevd", "cheevd", "zheevd"), "jnp.linalg.eigh (lax.linalg.eigh)"),
    (("sgeev", "dgeev", "cgeev", "zgeev"), "jnp.linalg.eig (lax.linalg.eig)"),
    (("sgesdd", "dgesdd", "cgesdd", "zgesdd"), "jnp.linalg.svd (lax.linalg.svd)"),
    (("sgetrf", "dgetrf", "cgetrf", "zgetrf"),
     "jax.scipy.linalg.lu / lu_factor, jnp.linalg.solve, jnp.linalg.det (lax.linalg.lu)"),
    (("ssytrd", "dsytrd", "chetrd", "zhetrd"), "lax.linalg.tridiagonal"),
    (("sgehrd", "dgehrd", "cgehrd", "zgehrd"), "lax.linalg.hessenberg"),
    (("sgees", "dgees", "cgees", "zgees"), "jax.scipy.linalg.schur (lax.linalg.schur)"),
    (("strsm", "dtrsm", "ctrsm", "ztrsm"),
     "jax.scipy.linalg.solve_triangular (lax.linalg.triangular_solve)"),
    (("sgtsv", "dgtsv", "cgtsv", "zgtsv"), "lax.linalg.tridiagonal_solve"),
)

_LAPACK_NOTE = (
    "In existing artifacts: rewritten to portable StableHLO. call_exported and save_exported "
    "replace each call by a private StableHLO function with the same results "
    "(jax2tf_native.lapack_rewrite, on by default, rewrite_lapack=False turns it off), so the "
    "call itself never reaches TF; verified on CPU against JAX's own back-compat artifacts "
    "(tests/jax2tf_native/linalg_isolated/lapack_rewrite_checks.py: all 44 CPU entries of "
    "that data, which "
    "cover potrf, getrf, geqrf, orgqr/ungqr, syevd/heevd, gesdd, trsm, gtsv, geev, gees, gehrd "
    "and sytrd/hetrd). A call still here was not rewritten: it is a "
    "jaxlib FFI handler that TF's XLA does not have (TF fails with 'No FFI handler registered "
    "for <target> on a platform Host', verified on CPU); JAX runs it. For new exports, "
    "convert(..., linalg='portable') lowers linear algebra to ops TF runs.")

_LAPACK = tuple(
    AllowedTarget(f"lapack_{name}_ffi", ("cpu",), emitted_by, (), _LAPACK_NOTE)
    for names, emitted_by in _LAPACK_OPS for name in names)

_GPU_NOTE = (
    "A jaxlib {lib} FFI handler, which TF's XLA does not register (the same reason lapack_*_ffi "
    "fails in TF on CPU, verified). Not run here: no GPU.")

# (target, platform, emitted_by, library)
_GPU_KERNELS: tuple[tuple[str, str, str, str], ...] = (
    ("cu_lu_pivots_to_permutation", "cuda", "lax.linalg.lu_pivots_to_permutation", "CUDA"),
    ("cusolver_getrf_ffi", "cuda", "jax.scipy.linalg.lu (lax.linalg.lu)", "cuSOLVER"),
    ("hip_lu_pivots_to_permutation", "rocm", "lax.linalg.lu_pivots_to_permutation", "HIP"),
    ("hipsolver_getrf_ffi", "rocm", "jax.scipy.linalg.lu (lax.linalg.lu)", "hipSOLVER"),
    ("cusolver_geqrf_ffi", "cuda", "jnp.linalg.qr (lax.linalg.geqrf)", "cuSOLVER"),
    ("cusolver_orgqr_ffi", "cuda", "jnp.linalg.qr (lax.linalg.householder_product)", "cuSOLVER"),
    ("hipsolver_geqrf_ffi", "rocm", "jnp.linalg.qr (lax.linalg.geqrf)", "hipSOLVER"),
    ("hipsolver_orgqr_ffi", "rocm", "jnp.linalg.qr (lax.linalg.householder_product)",
     "hipSOLVER"),
    ("cusolver_potrf_ffi", "cuda", "jnp.linalg.cholesky", "cuSOLVER"),
    ("hipsolver_potrf_ffi", "rocm", "jnp.linalg.cholesky", "hipSOLVER"),
    ("cusolver_syevd_ffi", "cuda", "jnp.linalg.eigh", "cuSOLVER"),
    ("hipsolver_syevd_ffi", "rocm", "jnp.linalg.eigh", "hipSOLVER"),
    ("cusolver_gesvd_ffi", "cuda", "jnp.linalg.svd", "cuSOLVER"),
    ("cusolver_gesvdj_ffi", "cuda", "jnp.linalg.svd", "cuSOLVER"),
    ("hipsolver_gesvd_ffi", "rocm", "jnp.linalg.svd", "hipSOLVER"),
    ("hipsolver_gesvdj_ffi", "rocm", "jnp.linalg.svd", "hipSOLVER"),
    ("hipsolver_gesdd_ffi", "rocm", "jnp.linalg.svd", "hipSOLVER"),
    ("cusolver_sytrd_ffi", "cuda", "lax.linalg.tridiagonal", "cuSOLVER"),
    ("hipsolver_sytrd_ffi", "rocm", "lax.linalg.tridiagonal", "hipSOLVER"),
    ("cusparse_gtsv2_ffi", "cuda", "lax.linalg.tridiagonal_solve", "cuSPARSE"),
    ("cu_threefry2x32_ffi", "cuda", "jax.random with the threefry PRNG", "CUDA"),
    ("hip_threefry2x32_ffi", "rocm", "jax.random with the threefry PRNG", "HIP"),
)

_GPU = tuple(
    AllowedTarget(target, (platform,), emitted_by, (), _GPU_NOTE.format(lib=lib))
    for target, platform, emitted_by, lib in _GPU_KERNELS)

_XLA_TPU_SOURCE = (
    "TPU claim from JAX's TPU back-compat data (jax2tf ran these in TF on TPU); not run here.")

_XLA_BUILTIN = (
    AllowedTarget(
        "Qr", ("cpu", "tpu"),
        "jnp.linalg.qr (lax.linalg.geqrf): JAX's TPU rule, and ours on CPU with "
        "convert(..., linalg='portable')",
        ("cpu", "tpu"),
        "JAX's stock CPU lowering emits lapack_*geqrf_ffi instead; jax2tf_native.linalg_portable "
        "lowers it to 'Qr', which XLA's QrExpander runs. "
        "Verified on CPU in TF and JAX (artifact cpu_xla_qr). " + _XLA_TPU_SOURCE),
    AllowedTarget(
        "ProductOfElementaryHouseholderReflectors", ("cpu", "tpu"),
        "jnp.linalg.qr (lax.linalg.householder_product): JAX's TPU rule, and ours on CPU with "
        "linalg='portable'",
        ("cpu", "tpu"),
        "As 'Qr': expanded by XLA's QrExpander. Verified on CPU in TF and JAX (artifact "
        "cpu_xla_qr). " + _XLA_TPU_SOURCE),
    AllowedTarget(
        "Eigh", ("cpu", "tpu"),
        "jnp.linalg.eigh (lax.linalg.eigh): JAX's TPU Jacobi rule, and ours on CPU (also inside "
        "svd) with linalg='portable'",
        ("cpu", "tpu"),
        "JAX's stock CPU lowering emits lapack_*syevd_ffi instead; jax2tf_native.linalg_portable "
        "lowers it to 'Eigh', which XLA's EighExpander runs. Verified on CPU in TF and JAX (artifact cpu_xla_eigh). "
        + _XLA_TPU_SOURCE),
    AllowedTarget(
        "LuDecomposition", ("tpu",), "jax.scipy.linalg.lu (lax.linalg.lu on TPU)", ("tpu",),
        "TPU only: on CPU both TF and JAX fail with 'No registered implementation for untyped "
        "custom call to LuDecomposition for Host' (verified). " + _XLA_TPU_SOURCE),
    AllowedTarget(
        "ApproxTopK", ALL_PLATFORMS, "lax.approx_max_k / approx_min_k (static k)", ALL_PLATFORMS,
        "On CPU/GPU XLA rewrites it to an exact sort (is_fallback). Verified on CPU in TF and JAX "
        "(artifact approx_top_k). Other platforms: XLA built-in, not run here."),
    AllowedTarget(
        "AllocateBuffer", ("cuda", "rocm", "tpu"), "lax.empty", ("cuda", "rocm", "tpu"),
        "On CPU lax.empty lowers to a constant instead (verified: no custom call). XLA built-in "
        "on GPU/TPU; not run here."),
    AllowedTarget(
        "Sharding", ALL_PLATFORMS,
        "jax.lax.with_sharding_constraint and sharded in/out specs, with Shardy disabled "
        "(jax_use_shardy_partitioner=False)", ALL_PLATFORMS,
        "With Shardy (JAX 0.10's default) JAX writes sdy.sharding_constraint instead. XLA "
        "built-in; verified on CPU in TF and JAX (artifact sharding_constraint)."),
    AllowedTarget(
        "SPMDFullToShardShape", ALL_PLATFORMS, "shard_map on a multi-device mesh, Shardy disabled",
        ALL_PLATFORMS,
        "XLA built-in consumed by the SPMD partitioner. Needs a mesh of more than one device: "
        "TF runs it under a TPU/GPU strategy; on a CPU-only host the call raises "
        "ModuleNotRunnableHereError (tf_ops.host_can_run) before XLA sees it. Not run here."),
    AllowedTarget(
        "SPMDShardToFullShape", ALL_PLATFORMS, "shard_map on a multi-device mesh, Shardy disabled",
        ALL_PLATFORMS, "As SPMDFullToShardShape."),
    AllowedTarget(
        "annotate_device_placement", ALL_PLATFORMS,
        "jax.device_put(..., memory_kind=...) / host offloading inside jit", (),
        "Runs in JAX on CPU, but TF fails with 'No registered implementation for untyped custom "
        "call to annotate_device_placement for Host' (verified, artifact memory_kind_placement). "
        "GPU/TPU not run here, so not claimed."),
)

_PLATFORM_INDEPENDENT = (
    AllowedTarget(
        "shape_assertion", ALL_PLATFORMS,
        "jax.export shape polymorphism (checks that actual shapes satisfy the symbolic ones)",
        ALL_PLATFORMS,
        "XlaCallModule evaluates the assertion during shape refinement and fails the call with "
        "the assertion message. Verified on CPU (artifact poly_batch_shape_assertions)."),
    AllowedTarget(
        "stablehlo.dynamic_top_k", ALL_PLATFORMS, "lax.top_k with a symbolic k", ALL_PLATFORMS,
        "Replaced by a static top_k during shape refinement. Verified on CPU (artifact "
        "stablehlo_dynamic_top_k)."),
    AllowedTarget(
        "stablehlo.dynamic_rng_bit_generator", ALL_PLATFORMS,
        "lax.rng_bit_generator with a symbolic output shape", ALL_PLATFORMS,
        "Replaced by a static rng_bit_generator during shape refinement. Verified on CPU "
        "(artifact stablehlo_dynamic_rng_bit_generator)."),
    AllowedTarget(
        "stablehlo.dynamic_reduce_window", ALL_PLATFORMS,
        "lax.reduce_window with symbolic window dimensions or padding (e.g. cumulative ops)",
        ALL_PLATFORMS,
        "Replaced by a static reduce_window during shape refinement. Verified on CPU (artifact "
        "stablehlo_dynamic_reduce_window)."),
    AllowedTarget(
        "stablehlo.dynamic_approx_top_k", ALL_PLATFORMS, "lax.approx_max_k with a symbolic k",
        ALL_PLATFORMS,
        "Refined to ApproxTopK. Verified on CPU (artifact stablehlo_dynamic_approx_top_k)."),
)

_KERNEL_LANGUAGES = (
    AllowedTarget(
        "tpu_custom_call", ("tpu",), "Pallas/Mosaic TPU kernels (pl.pallas_call on TPU)", (),
        "Stable in JAX. Whether TF's TPU runtime executes Mosaic kernels was not verified, so "
        "not claimed; override with DisabledSafetyCheck.custom_call('tpu_custom_call')."),
    AllowedTarget(
        "mosaic_gpu_v2", ("cuda",), "Pallas Mosaic GPU kernels", (),
        "Stable in JAX; the handler lives in jaxlib, so TF's XLA cannot run it. Not run here."),
    AllowedTarget(
        "tf.call_tf_function", ALL_PLATFORMS, "jax2tf.call_tf(..., call_tf_graph=True)",
        ALL_PLATFORMS,
        "Calls the TF function passed in XlaCallModule's function_list, which convert builds "
        "from the functions collected while exporting (a serialized module cannot carry them "
        "and is refused). Verified on CPU (tests/jax2tf_native/test_call_tf.py)."),
)

ALLOWLIST: tuple[AllowedTarget, ...] = (
    *_LAPACK, *_GPU, *_XLA_BUILTIN, *_PLATFORM_INDEPENDENT, *_KERNEL_LANGUAGES)

ALLOWLIST_BY_TARGET: Mapping[str, AllowedTarget] = {t.target: t for t in ALLOWLIST}

if len(ALLOWLIST_BY_TARGET) != len(ALLOWLIST):  # a duplicate would silently shadow an entry
    raise AssertionError("duplicate target in ALLOWLIST")


def allowed_targets() -> frozenset[str]:
    """All target names on the list."""
    return frozenset(ALLOWLIST_BY_TARGET)


def targets_emittable_on(platform: str) -> tuple[AllowedTarget, ...]:
    """The entries a module lowered for `platform` may contain, in list order.

    Example:
        >>> "lapack_sgeqrf_ffi" in {t.target for t in targets_emittable_on("cpu")}
        True
    """
    return tuple(t for t in ALLOWLIST if platform in t.platforms)
