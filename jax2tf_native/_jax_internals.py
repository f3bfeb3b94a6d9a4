"""The JAX internals jax2tf-native cannot avoid, each with why. Nothing else imports `jax._src`.

Every name here is pinned by tests/jax2tf_native/test_jax_internals.py, which fails loudly when a
JAX upgrade
moves or changes it.
"""
import contextlib
import dataclasses
import sys
import threading
from typing import Any, Callable, Iterator

import jax
from jax._src.export import shape_poly as _shape_poly  # see jax_shape_assertion_message

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


# Why: plain TF graphs (enable_xla=False) run cholesky, triangular_solve, eigh and svd on TF's own
# kernels by way of the LAPACK custom calls of JAX's CPU lowering (tf_ops.plain.lapack_kernels).
# For eigh and svd the plain rule table still overrides the primitive, to send what JAX's CPU
# lowering refuses (subset_by_index, svd's QR/Jacobi algorithms) to the portable rule, so the
# override must call JAX's own CPU rule for the rest. JAX keeps that rule only in its lowering
# registry (`mlir.register_lowering(..., platform="cpu")`), which has no public reader.
from jax._src.interpreters import mlir as _jax_mlir_registry  # noqa: E402


def cpu_lowering_rule(primitive) -> Callable:
    """JAX's own CPU lowering rule of `primitive` (LAPACK custom calls for linear algebra)."""
    return _jax_mlir_registry._platform_specific_lowerings["cpu"][primitive].rule


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


# Why: jax2tf raises "convert must be used outside all JAX transformations" when a converted
# function is called while JAX traces, even when no argument is a tracer (`jax.vmap(lambda y: y
# + f_tf())`, a nested convert): the result would be a TF value inside a JAX trace. JAX's trace
# state (`jax._src.core.trace_state_clean`) is the only way to tell, and jax2tf reads the same.
# TF code that jax2tf's call_tf runs while JAX traces may legitimately call converted functions:
# jax2tf marks that with `_thread_local_state.inside_call_tf`; we mark our own call_tf shape
# resolution (below) with `_tf_called_from_jax`.
from jax._src import core as _jax_core  # noqa: E402

_tf_called_from_jax = threading.local()


def inside_jax_transformation() -> bool:
    """Whether JAX is tracing now, outside TF code that call_tf runs (where TF may call
    converted functions)."""
    if _jax_core.trace_state_clean() or getattr(_tf_called_from_jax, "depth", 0):
        return False
    peer = sys.modules.get(CALL_TF_PEER_MODULE)
    return not (peer is not None and getattr(peer._thread_local_state, "inside_call_tf", False))


@contextlib.contextmanager
def tf_called_from_jax() -> Iterator[None]:
    """Marks TF code run while JAX traces a call_tf (converted functions may run in it)."""
    _tf_called_from_jax.depth = getattr(_tf_called_from_jax, "depth", 0) + 1
    try:
        yield
    finally:
        _tf_called_from_jax.depth -= 1


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
    get_vjp = exported._get_vjp
    new_get_vjp = None if get_vjp is None else (lambda e: transform_vjp(get_vjp(e)))
    return dataclasses.replace(exported, mlir_module_serialized=serialized, _get_vjp=new_get_vjp)


# Why: a `call_tf` whose TF function has a dynamic output shape (a polymorphic batch) is refused
# by the peer's abstract evaluation ("call_tf cannot call functions whose output has dynamic
# shape"), before any public hook runs. To split a converted function at such calls
# (jax2tf_native.call_tf_split), tracing must give those results symbolic shapes that TF's own
# shape inference implies. The primitive lives in the module `jax.experimental.jax2tf.call_tf`
# (the package attribute of that name is the function); its abstract evaluation is the
# `abstract_eval` attribute JAX's `Primitive.def_effectful_abstract_eval` sets. We install, once,
# a wrapper that asks a thread-local resolver first and otherwise calls the peer's own
# evaluation unchanged; the resolver's answer is passed as the peer's `output_avals` keyword
# (what `call_tf(..., output_shape_dtype=...)` passes), so the effects stay the peer's.
CALL_TF_PRIMITIVE_MODULE = "jax.experimental.jax2tf.call_tf"
_call_tf_resolver = threading.local()


def call_tf_primitive():
    """jax2tf's `call_tf` primitive, or None when jax2tf was never imported (no call_tf then)."""
    module = sys.modules.get(CALL_TF_PRIMITIVE_MODULE)
    return None if module is None else module.call_tf_p


def _install_call_tf_abstract_eval_wrapper(primitive) -> None:
    peer_eval = primitive.abstract_eval
    if getattr(peer_eval, "_jax2tf_native_wrapper", False):
        return

    def abstract_eval(*avals, **params):
        resolver = getattr(_call_tf_resolver, "fn", None)
        if resolver is not None:
            with tf_called_from_jax():
                resolved = resolver(avals, params)
            if resolved is not None:
                params = dict(params, output_avals=resolved)
        return peer_eval(*avals, **params)

    abstract_eval._jax2tf_native_wrapper = True
    primitive.abstract_eval = abstract_eval


@contextlib.contextmanager
def resolving_call_tf_output_avals(resolver) -> Iterator[None]:
    """In this scope (this thread), call_tf results get `resolver(avals, params)`'s avals.

    `resolver` returns a tuple of `jax.core.ShapedArray` (possibly symbolic), or None to leave
    the call to the peer's own evaluation. It also sees calls that declare `output_avals`
    (call_tf's `output_shape_dtype`), and may restate them.
    """
    primitive = call_tf_primitive()
    if primitive is None:
        yield
        return
    _install_call_tf_abstract_eval_wrapper(primitive)
    previous = getattr(_call_tf_resolver, "fn", None)
    _call_tf_resolver.fn = resolver
    try:
        yield
    finally:
        _call_tf_resolver.fn = previous


# Why: fitting a call_tf result dimension as an expression of the dimension variables needs the
# variables a symbolic dimension uses and its value at given variable values; `jax.export` has
# no public accessor for either (`jax.export.symbolic_shape` parses, `.scope` is public).
def dimension_variables(dim) -> set[str]:
    """The dimension variable names in a symbolic dimension (empty for an int)."""
    return set() if isinstance(dim, int) else set(dim._get_vars())


def evaluate_dimension(dim, env: dict[str, int]) -> int:
    """The int value of a dimension at the variable values `env`."""
    return dim if isinstance(dim, int) else int(dim._evaluate(env))


# Why: an error about one call_tf should name the TF function the user passed; the primitive's
# parameters hold only jax2tf's flat wrapper (`callable_flat_tf`), which closes over it as
# `callable_tf`.
def call_tf_user_function(params: dict):
    """The TF callable given to `call_tf` for a call_tf equation's params, None if not found."""
    return _call_tf_closure(params, "callable_tf")


# Why: as above; the pytree of the call's arguments (`args_treedef`, which jax2tf's wrapper
# unflattens the flat TF arguments with) is likewise only in the wrapper's closure. Used to
# call a jax2tf_native-converted TF function's JAX function on the call's arguments.
def call_tf_args_treedef(params: dict):
    """The pytree definition of the arguments of a call_tf equation, None if not found."""
    return _call_tf_closure(params, "args_treedef")


def _call_tf_closure(params: dict, name: str):
    wrapper = params.get("callable_flat_tf")
    names = getattr(getattr(wrapper, "__code__", None), "co_freevars", ())
    if name not in names or wrapper.__closure__ is None:
        return None
    return wrapper.__closure__[names.index(name)].cell_contents


# Why: a call_tf equation's parameters are jax2tf's private interface, and the split at a
# symbolic call_tf (call_tf_split, call_tf_result_shapes) needs four of them: the TF function
# (`function_flat_tf`, a tf.function, and `callable_flat_tf`, its Python callable), the TF
# signature of the flat arguments (`args_flat_sig_tf`) and the declared result avals
# (`output_avals`, from call_tf's output_shape_dtype; None when not declared).
@dataclasses.dataclass(frozen=True)
class CallTfParams:
    """The parts of a call_tf equation's parameters that jax2tf-native reads."""
    callable_flat_tf: Callable
    function_flat_tf: Any
    args_signature: tuple
    output_avals: tuple | None


def call_tf_params(params: dict) -> CallTfParams:
    """The `CallTfParams` of a call_tf equation's (or abstract evaluation's) parameters."""
    return CallTfParams(params["callable_flat_tf"], params["function_flat_tf"],
                        tuple(params["args_flat_sig_tf"]), params.get("output_avals"))


# Why: running a jaxpr one equation at a time (each stretch between TF calls of a split
# function) needs what jax.core.eval_jaxpr does per equation: the primitive's bind parameters
# (`get_bind_params`, e.g. a closed jaxpr back to a callable) inside the equation's context
# (`eqn.ctx.manager`); jax.extend.core has no public "evaluate one equation".
def bind_equation(eqn, values) -> list:
    """Binds one jaxpr equation to `values` as jax.core.eval_jaxpr does; a list of results."""
    params = eqn.primitive.get_bind_params(eqn.params)
    with eqn.ctx.manager:
        outs = eqn.primitive.bind(*values, **params)
    return list(outs) if eqn.primitive.multiple_results else [outs]


# Why: jax2tf's shape errors are JAX's own shape-assertion texts, in full ("Input shapes do not
# match the polymorphic shapes specification. Expected value >= 1 for dimension variable 'b'.
# Using the following polymorphic shapes specifications: args[0].shape = (2*b + a, a, c + b +
# a). Obtained dimension variables: 'a' = 2 from ... Please see ... for more details."), and
# "Cannot solve for values of dimension variables {'b'}. ..." for specs JAX cannot solve; the
# peer's suite and its users match on them. We check shapes before the module runs (TF's shape
# refinement would otherwise fail first with an MLIR dump), so we need the same texts without
# running the module. JAX builds them in `jax._src.export.shape_poly.solve_dim_vars` (the
# solution, and constraints carrying their message pieces) and formats them with actual sizes
# in `ShapeConstraints.check_statically`; no public API exposes either. Arguments are named
# args[0], args[1], ... by flat position (callers put their own paths back).
def jax_unsolvable_message(structs) -> str | None:
    """JAX's "Cannot solve for values of dimension variables ..." for these argument specs
    (`jax.ShapeDtypeStruct`s, symbolic dimensions allowed), or None when JAX solves them."""
    try:
        _solve(tuple(structs))
    except ValueError as e:
        return str(e)
    return None


def jax_shape_assertion_message(structs, actual_shapes) -> str | None:
    """The message of the first shape assertion JAX's module would fail for arguments of
    `actual_shapes` (ints), or None when all hold (or JAX cannot solve the specs)."""
    try:
        _, constraints, synthetic = _solve(tuple(structs))
    except ValueError:
        return None
    env = {name: int(actual_shapes[arg][dim]) for name, arg, dim in synthetic}
    try:
        constraints.check_statically(_shape_poly.ShapeEvaluator(env))
    except ValueError as e:
        return str(e)
    return None


def _solve(structs: tuple):
    tree = jax.tree_util.tree_structure((tuple(range(len(structs))), {}))
    return _shape_poly.solve_dim_vars(structs, tree)


def jax_dimension_sizes(structs, actual_shapes, shapes) -> list[list[int]]:
    """`shapes` (symbolic in the dimension variables of `structs`) at the sizes JAX gives the
    variables for arguments of `actual_shapes` (ints), by the same solving (see above)."""
    solution, _, synthetic = _solve(tuple(structs))
    from_arguments = _shape_poly.ShapeEvaluator(
        {name: int(actual_shapes[arg][dim]) for name, arg, dim in synthetic})
    variables = _shape_poly.ShapeEvaluator(
        {var: int(from_arguments.evaluate(expr)) for var, expr in solution.items()})
    return [[int(variables.evaluate(d)) for d in shape] for shape in shapes]
