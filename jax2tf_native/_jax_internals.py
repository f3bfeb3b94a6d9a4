"""The JAX internals jax2tf-native cannot avoid, each with why. Nothing else imports `jax._src`.

Every name here is pinned by tests/test_jax_internals.py, which fails loudly when a JAX upgrade
moves or changes it.
"""
import contextlib
import sys
from typing import Iterator

import jax

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


# Why: `jax.experimental.jax2tf.call_tf(..., call_tf_graph=True)` lowers to a custom call that
# names a TF concrete function by its index in XlaCallModule's `function_list`; while lowering,
# it appends the function to `jax2tf._thread_local_state.call_tf_concrete_function_list` and
# refuses ("only support exporting by jax2tf.convert") when that list is None. jax2tf has no
# public hook for it, so exports that may contain such calls set the list for their duration
# and pass the collected functions to the XlaCallModule op.
CALL_TF_PEER_MODULE = "jax.experimental.jax2tf.jax2tf"


@contextlib.contextmanager
def collecting_call_tf_functions() -> Iterator[list]:
    """Yields the list that call_tf_graph=True calls lowered in this scope append to.

    Without jax2tf imported no function can hold a call_tf, so nothing is imported then.
    """
    peer = sys.modules.get(CALL_TF_PEER_MODULE)
    if peer is None:
        yield []
        return
    state = peer._thread_local_state
    previous = state.call_tf_concrete_function_list
    state.call_tf_concrete_function_list = collected = []
    try:
        yield collected
    finally:
        state.call_tf_concrete_function_list = previous


# Why: TF's XlaSharding op takes an XLA OpSharding, and JAX 0.10 exports record shardings as
# NamedShardings (`Exported.in_shardings_jax(None)`, public) whose HLO form has no public
# accessor. jax2tf calls the same method (through jax._src.export._export.named_to_hlo_sharding).
def named_sharding_to_hlo(sharding, ndim: int):
    """The `HloSharding` of a NamedSharding for an array of rank `ndim`."""
    return sharding._to_xla_hlo_sharding(ndim)


# Why: a `jax.jit(f, in_shardings=..., out_shardings=...)` passed to `convert` declares the
# shardings of its arguments and results, and our export wraps it in a flat function of its
# leaves, so the outer export must repeat them (else they become inner constraints and TF's
# HLO parameters carry none). `Traced.out_info` has the result shardings publicly, but no
# public field has the declared argument shardings; `Traced._params` has both, flattened over
# (args, kwargs) leaves, UnspecifiedValue where none was given.
def jit_declared_shardings(traced) -> tuple[tuple, tuple]:
    """(in_shardings, out_shardings) of a traced jit, flat; non-Sharding entries -> None."""
    params = traced._params

    def clean(shardings):
        return tuple(s if isinstance(s, jax.sharding.Sharding) else None for s in shardings)

    return clean(params["in_shardings"]), clean(params["out_shardings"])


# Why: rewriting an artifact's module (jax2tf_native.lapack_rewrite) must keep every other field
# of the `Exported` and make `Exported.vjp()` return the rewritten VJP too; the VJP is only
# reachable through the dataclass field `_get_vjp` (Exported has no public constructor for a
# changed module, and `dataclasses.replace` must name the field).
def exported_with_module(exported, serialized: bytes, transform_vjp):
    """`exported` with `mlir_module_serialized` replaced; `vjp()` gives `transform_vjp(vjp)`."""
    import dataclasses
    get_vjp = exported._get_vjp
    new_get_vjp = None if get_vjp is None else (lambda e: transform_vjp(get_vjp(e)))
    return dataclasses.replace(exported, mlir_module_serialized=serialized, _get_vjp=new_get_vjp)
