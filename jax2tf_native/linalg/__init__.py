"""Linear algebra that TensorFlow's XLA can run: portable lowering rules.

On CPU, JAX lowers ``jax.lax.linalg`` primitives to LAPACK custom calls
(``lapack_sgetrf_ffi``, ``lapack_spotrf_ffi``, ...) whose handlers live in
jaxlib, so a module exported with them fails inside TensorFlow with
``No FFI handler registered for lapack_*``. This module supplies replacement
lowering rules that only emit what TF 2.21's XLA executes on CPU (measured):
the HLO ops ``stablehlo.cholesky`` and ``stablehlo.triangular_solve``, and the
custom calls ``Qr``, ``ProductOfElementaryHouseholderReflectors`` and ``Eigh``
(XLA expands these itself). Everything else is written as ordinary JAX code
on top of those.

Design note
-----------
*Hook.* The rules are handed to ``jax.export.export`` through its documented
``_override_lowering_rules`` keyword (a sequence of ``(primitive, rule)``)
rather than installed with ``jax.interpreters.mlir.register_lowering``:

- ``register_lowering`` mutates JAX's process-global registry. JAX caches
  lowerings (``_cached_lowering_to_hlo`` is keyed on the jaxpr and the
  lowering parameters, not on the registry), and ``jnp.linalg`` functions are
  themselves jitted, so a LAPACK lowering cached before the scope could leak
  into the export and a portable one cached inside it could leak into later
  normal JAX use. Restoring the registry also races with any other thread
  that lowers while the scope is open; a lock only helps threads that take it.
- The override rides in ``mlir.LoweringParameters``, which is part of every
  lowering cache key and of the module context that nested jits, ``lower_fun``
  and control flow lower with. So the override reaches the primitives inside
  ``jnp.linalg``'s own jits, cannot be served a cached LAPACK lowering, and
  never changes how anything outside the export lowers. Nothing global is
  mutated, so concurrent exports (portable or native) need no lock. The only
  shared state is the rule table, built once under a lock so its identity
  (part of the cache key) is stable and repeated exports hit JAX's cache.
- Its cost: it is an underscore keyword ("advanced, subject to change";
  pinned by tests/jax2tf_native/test_linalg_portable.py, which fails if it stops working),
  and an override applies to every platform of a multi-platform export. The
  rules below emit platform-neutral StableHLO, so that is what we want anyway
  (measured runnable in TF on CPU; GPU/TPU could not be run here).

*Rules.* ``triangular_solve`` emits the HLO op directly; ``cholesky`` is a
blocked algorithm in JAX (XLA's own expansion of ``stablehlo.cholesky`` is
~10x slower on CPU; a symbolic matrix size takes the rolled unblocked loop).
``householder_product`` and the ``geqrf`` step of ``qr`` emit the XLA custom
calls through the public ``jax.ffi`` API (``custom_call_api_version=1``), which
also handles symbolic (polymorphic) shapes. ``eigh`` emits XLA's ``Eigh``
(Jacobi) custom call, then refines its result to LAPACK accuracy (see the
eigh section below). ``lu`` is a blocked, partially pivoted LU in
JAX here (so ``solve``, ``inv``, ``det``, ``expm``, ``lu_factor`` work).
``svd`` is QDWH polar decomposition (public ``jax.lax.linalg.qdwh``) followed
by ``eigh`` of the Hermitian factor, the same algorithm JAX uses on TPU.
``ormqr`` multiplies by an explicit Q. Where JAX's CPU result is LAPACK's
element for element, the rules follow LAPACK's algorithm step for step:
``tridiagonal_solve`` is ``gtsv`` (pivoting), ``tridiagonal`` is ``sytd2``/
``hetd2``, column-pivoted QR is ``geqp3``/``laqp2``; ``cholesky`` keeps the
input's upper triangle and ``eigh`` always sorts, as LAPACK does (tested per
primitive in tests/jax2tf_native/linalg_isolated/primitive_checks.py). ``eig`` is a
Hessenberg reduction (``gehrd``'s layout) plus the shifted QR iteration of
``schur`` and eigenvectors from the Schur form (``hessenberg``, ``schur``,
``eig``; registered by ``nonsymmetric_rules``; a symbolic n works too).
``tridiagonal_solve(perturb_singular=True)`` is not gtsv on CPU but jaxlib's own kernel,
repeated bit for bit (``tridiagonal_solve_perturbed``, with ``kernel_arith`` rounding as its
C++ does). Symbolic sizes work, also two unrelated ones ("m, n") for qr, ormqr and svd.
:class:`NonPortableLinalgError` is raised while exporting, never at TF run time, for a module
with LAPACK calls (``check_module_portable``) and, as a net, for any symbolic size comparison
an algorithm asks that jax.export cannot decide.
One JAX internal is used: ``geqrf_p``/``geqp3_p``, which public functions
bind but JAX does not export (``_jax_internals``, pinned by a test).

Modules: ``rules`` (the rule table and ``export_scope``), ``module_check``
(``check_module_portable``), ``errors``, and one module per algorithm
(``cholesky``, ``lu``, ``qr``, ``qr_pivoted``, ``eigh``, ``svd``,
``tridiagonal``, ``tridiagonal_solve``, ``tridiagonal_solve_perturbed``, ``hessenberg``,
``schur``, ``eig``; ``kernel_arith`` rounds like jaxlib's compiled kernels;
``householder`` has LAPACK's reflector, ``common`` small shared helpers).
"""

from jax2tf_native.linalg.errors import NonPortableLinalgError
from jax2tf_native.linalg.module_check import (PORTABLE_CUSTOM_CALL_TARGETS,
                                               check_module_portable, custom_call_targets)
from jax2tf_native.linalg.rules import export_scope, portable_lowering_rules

__all__ = [
    "NonPortableLinalgError",
    "PORTABLE_CUSTOM_CALL_TARGETS",
    "check_module_portable",
    "custom_call_targets",
    "export_scope",
    "portable_lowering_rules",
]
