"""The JAX internals jax2tf-native cannot avoid, each with why. Nothing else imports `jax._src`.

Every name here is pinned by tests/test_jax_internals.py, which fails loudly when a JAX upgrade
moves or changes it.
"""
# Why: `geqrf_p` (Householder QR) and `geqp3_p` (column-pivoted QR) are bound directly by public
# functions -- jnp.linalg.qr(mode="raw"), jnp.linalg.slogdet(method="qr"),
# jax.scipy.linalg.qr_multiply -- and JAX lowers them to LAPACK (lapack_?geqrf_ffi,
# lapack_?geqp3_ffi) on CPU, which TF cannot run. linalg_portable must override their lowering,
# and JAX 0.10.2 exports neither primitive publicly (not in jax.lax.linalg, not in
# jax.extend.core.primitives; other linalg primitives are there).
from jax._src.lax.linalg import geqp3_p as geqp3_p  # noqa: F401
from jax._src.lax.linalg import geqrf_p as geqrf_p  # noqa: F401


# Why: jax.export.export's documented but underscore-prefixed keyword `_override_lowering_rules`
# (a sequence of (primitive, lowering rule)) is the only hook that changes lowering for one
# export without touching JAX's process-global registry, and it is part of JAX's lowering-cache
# key, so cached LAPACK lowerings of jnp.linalg's nested jits cannot leak in (see
# linalg_portable). Named here so that the dependency is explicit and pinned.
OVERRIDE_LOWERING_RULES_KWARG = "_override_lowering_rules"
