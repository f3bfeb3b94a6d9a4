"""`convert`: a drop-in for `jax.experimental.jax2tf.convert` built on `jax.export`."""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import operator
import warnings
from typing import Any, Callable, Sequence

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native import (arg_specs, call_tf_split, errors, export_cache, exporting,
                           flat_function, function_node, gradients, prepared_export, shardings,
                           tf_args)
from jax2tf_native.function_node import DifferentiableFunction
from tf_ops import arguments as tf_arguments
from tf_ops import custom_call_check
from tf_ops import platforms as tf_platforms
from tf_ops import tf_targets


@dataclasses.dataclass(frozen=True)
class _Options:
    polymorphic_shapes: Any
    constraints: tuple[str, ...]
    with_gradient: bool
    gradient_mode: str
    gradient_order: int | None
    gradient_argnums: tuple[int, ...] | None
    gradient_outputs: tuple[int, ...] | None
    residual_policy: Callable | None
    export: exporting.ExportOptions
    # The stretches of a function split at call_tf (call_tf_split) re-bind equations whose
    # parameters hold the whole function's symbolic dimensions: they must share its scope.
    scope: jax.export.SymbolicScope | None = None


def convert(fun: Callable, *, polymorphic_shapes=None, polymorphic_constraints: Sequence[str] = (),
            with_gradient: bool = True, platforms: Sequence[str] | None = None,
            disabled_checks: Sequence[jax.export.DisabledSafetyCheck] = (),
            native_serialization_platforms: Sequence[str] | None = None,
            native_serialization_disabled_checks: Sequence[jax.export.DisabledSafetyCheck] = (),
            gradient_mode: str = "residuals",
            gradient_order: int | None = None,
            gradient_argnums: int | Sequence[int] | None = None,
            gradient_outputs: int | Sequence[int] | None = None,
            residual_policy: Callable | None = None,
            linalg: str = "portable",
            stablehlo_version: str | None = None,
            target_tf: str | None = None,
            cache_size: int = export_cache.DEFAULT_CACHE_SIZE,
            native_serialization: bool = True, enable_xla: bool = True) -> Callable:
    """Converts a JAX function into one that takes and returns TF tensors.

    The function is exported with `jax.export` once per abstract signature and runs as a single
    `XlaCallModule` op, eagerly or inside `tf.function` (with or without `jit_compile=True`).
    TF gradients (`tf.GradientTape`, any order) run exported JAX VJPs. With `enable_xla=False`
    the same exported modules run as ordinary TF ops instead (no XLA op anywhere).

    Args:
      fun: the JAX function; arguments and results may be pytrees of arrays.
      polymorphic_shapes: None (static shapes), a shape string for all positional arguments, or
        a pytree prefix of the positional arguments with None or strings such as "b, ...",
        "(b, 28, 28, 1)", "2*b". Keyword arguments are static, as in jax2tf.
      polymorphic_constraints: strings such as "b >= 16" over the dimension variables.
      with_gradient: whether TF may differentiate the result; False adds `PreventGradient`.
      platforms: platforms to lower for, e.g. ("cpu", "cuda", "tpu"); default the JAX backend.
        A module for platforms (or a shard_map over devices) this host lacks converts, traces
        and saves; running it here raises `ModuleNotRunnableHereError`.
      disabled_checks: `jax.export.DisabledSafetyCheck` values.
      native_serialization_platforms: jax2tf's name for `platforms`.
      native_serialization_disabled_checks: jax2tf's name for `disabled_checks`.
      gradient_mode: "residuals" (default): when a gradient tape records the call, the forward
        op also returns the VJP residuals of the inputs the tape watches and the backward op
        uses them, so the forward pass is not recomputed; when none records (inference), the
        primal module runs and nothing else is exported. "recompute": the backward op
        recomputes the forward pass (jax2tf's behaviour). Gradients that do not come from a
        tape recording at the call (`tf.gradients`, an outer tape around a `tf.function`
        traced without one) recompute in both modes.
      gradient_order: the highest derivative order TF may take (None: any). 1 leaves no custom
        gradient inside the backward pass, which is what a SavedModel can store.
      gradient_argnums: the positional arguments TF gradients are taken for, like `argnums` of
        `jax.grad` (None: every float argument). The backward op then computes only their
        cotangents; every other argument, keyword arguments included, gets a None first-order
        gradient, as an integer one does. Inputs no recording tape watches (a training step's
        data batch) take no cotangent anyway; `gradient_argnums` also limits gradients no
        tape recorded at the call (`tf.gradients`, a SavedModel's) and inputs a tape watches
        but you do not need. Higher orders see every float argument: the gradient w.r.t.
        argument 1 can itself be differentiated w.r.t. argument 0 (a gradient penalty).
      gradient_outputs: the positions in `fun`'s result tuple (or list) TF gradients flow from
        (None: every float result), like the value of `jax.value_and_grad(..., has_aux=True)`:
        the forward op keeps residuals for these only, and the others (metrics, auxiliary
        outputs) are cut from the gradient path (a gradient through them is None). A result
        that is not a tuple or list (an array, a dict) is position 0 as a whole.
      residual_policy: a `jax.checkpoint_policies` value choosing which intermediates the
        forward op returns as residuals (residual mode); the backward op recomputes the others
        from them. None (default): all that `jax.vjp` keeps, nothing is recomputed.
        `jax.checkpoint_policies.dots_saveable` keeps matmul/convolution outputs only: fewer
        forward outputs (cheaper inference calls, faster export) for a little elementwise
        recomputation in the backward op; measure on your model. Only for
        gradient_mode="residuals"; a policy that makes the export fail raises
        `GradientSpecError` at the first call.
      linalg: "portable" (default): jnp.linalg / jax.scipy.linalg lower to StableHLO that TF's
        XLA runs (JAX's CPU lowering uses LAPACK custom calls TF lacks); "native": JAX's own
        lowering, for modules that run back in JAX (TF cannot run its LAPACK calls: they fail
        at export with `CustomCallNotAllowedError`). Every `jax.lax.linalg` primitive has a
        portable form (docs/linalg.md).
      stablehlo_version: for experts: the StableHLO version to write (e.g. "1.13.7"); default
        the target TF's. Prefer `target_tf`, which also picks the calling convention.
      target_tf: the TensorFlow version that will run the modules, "2.17" ... "2.21" (default:
        the installed TF): picks the XlaCallModule calling convention and the StableHLO version
        that TF runs, from the table measured by tools/tf_version_matrix.py. What that TF
        cannot read fails at export with `TargetTfError` naming the op and the oldest TF that
        runs it. E.g. target_tf="2.19" for a TF Serving fleet on TF 2.19.
      cache_size: how many exports a converted function keeps for eager calls (LRU; default
        64).
      native_serialization: accepted for jax2tf compatibility; any value other than True is
        ignored with a DeprecationWarning, as jax2tf does (serialization is always native).
      enable_xla: True (default): each module runs as one XlaCallModule op, run by TF's XLA.
        False: the exported StableHLO (the same `jax.export` modules: portable linear algebra,
        and for gradients the exported JAX VJPs) is lowered to ordinary TF ops, for consumers
        without XLA (TF.js, TFLite builtins, tf2onnx, Core ML, TF Serving GPU images without
        XLA's CUDA compiler, tensorflow-metal). The graphs and their gradient functions hold
        no XLA op. An op that cannot be lowered exactly raises `PlainLoweringError` (a
        NotImplementedError naming the op, its dtypes and source line) at the first call or
        trace. Modules for several platforms or devices, and call_tf with
        call_tf_graph=True, are refused. Coverage: tools/results/plain_coverage.md.

    Returns:
      A function taking TF tensors, `tf.Variable`s, numpy arrays or Python numbers in the same
      pytree structure as `fun`, and returning TF tensors in `fun`'s result structure.

    Raises:
      TypeError: `fun` is not callable, or an option has the wrong type.
      ValueError: an option is invalid (the message says which and how to fix it).
      TargetTfError (at the first call): `target_tf` cannot run the function's module.
      PlainLoweringError (at the first call, with `enable_xla=False`): an op of the module has
        no exact plain-TF lowering.

    Example:
        >>> import jax.numpy as jnp, numpy as np, tensorflow as tf
        >>> from jax2tf_native import input_signature
        >>> f_tf = convert(lambda x: jnp.sin(x) * 2, polymorphic_shapes=["(b, 3)"])
        >>> f_tf(tf.ones((5, 3))).shape                              # eager
        TensorShape([5, 3])
        >>> f_graph = tf.function(f_tf, autograph=False,
        ...                       input_signature=input_signature([np.ones((1, 3), np.float32)],
        ...                                                       ["(b, 3)"]))
        >>> f_graph(tf.ones((7, 3))).shape                           # any batch size
        TensorShape([7, 3])
    """
    if not callable(fun):
        # "Expected a callable value" is jax2tf's (JAX's check_callable) phrase.
        raise TypeError(f"Expected a callable value, got {fun!r:.60}: "
                        f"convert expects a callable JAX function, got {type(fun).__name__} "
                        f"({fun!r:.60}). Fix: pass the function itself, e.g. convert(model_fn).")
    if native_serialization is not True:
        # As jax2tf (JAX 0.10) does: deprecated there, ignored, always native.
        warnings.warn(f"convert's native_serialization={native_serialization!r} is ignored: "
                      f"jax2tf_native (like jax2tf in JAX 0.10) always serializes natively "
                      f"through jax.export. Fix: drop the argument.", DeprecationWarning,
                      stacklevel=2)
    enable_xla = check_enable_xla(enable_xla)
    if platforms is not None and native_serialization_platforms is not None:
        raise ValueError("Pass either platforms= or native_serialization_platforms=, not both.")
    if disabled_checks and native_serialization_disabled_checks:
        raise ValueError("Pass either disabled_checks= or native_serialization_disabled_checks=, "
                         "not both.")
    if not isinstance(with_gradient, bool):
        raise TypeError(f"with_gradient must be True or False, got {with_gradient!r}.")
    if isinstance(polymorphic_constraints, str):
        polymorphic_constraints = (polymorphic_constraints,)
    target = tf_targets.resolve(target_tf)
    options = _Options(
        polymorphic_shapes=polymorphic_shapes,
        constraints=tuple(polymorphic_constraints),
        with_gradient=with_gradient,
        gradient_mode=function_node.check_gradient_mode(gradient_mode),
        gradient_order=_check_gradient_order(gradient_order),
        gradient_argnums=_check_positions("gradient_argnums", gradient_argnums),
        gradient_outputs=_check_positions("gradient_outputs", gradient_outputs),
        residual_policy=_check_residual_policy(residual_policy, gradient_mode),
        export=exporting.ExportOptions(
            platforms=tf_platforms.canonical_platforms(
                platforms if platforms is not None else native_serialization_platforms,
                keyword=("platforms" if platforms is not None
                         else "native_serialization_platforms")),
            disabled_checks=custom_call_check.canonical_disabled_checks(
                disabled_checks or native_serialization_disabled_checks,
                keyword=("disabled_checks" if disabled_checks
                         else "native_serialization_disabled_checks")),
            stablehlo_version=tf_targets.target_stablehlo_version(target, stablehlo_version),
            linalg=exporting.check_linalg_mode(linalg), target_tf=target,
            plain=not enable_xla),
    )
    arg_specs.make_scope(options.constraints)  # Reject malformed constraints now.
    return _Converted(fun, options, cache_size)


def check_enable_xla(enable_xla) -> bool:
    """Validates `enable_xla` (True or False; numpy bools too)."""
    if not isinstance(enable_xla, (bool, np.bool_)):
        raise TypeError(f"enable_xla must be True or False, got {enable_xla!r}. True (default): "
                        f"one XlaCallModule op run by TF's XLA; False: ordinary TF ops.")
    return bool(enable_xla)


def _check_gradient_order(order):
    if order is not None and (not isinstance(order, int) or isinstance(order, bool) or order < 0):
        raise ValueError(f"gradient_order must be None or an int >= 0, got {order!r}.")
    return order


_POSITIONS_EXAMPLE = {
    "gradient_argnums": "positional argument indices, as jax.grad's argnums), got {value!r}. "
                        "Fix: e.g. gradient_argnums=0 for the parameters of loss(params, x, y).",
    "gradient_outputs": "positions in the result tuple), got {value!r}. Fix: e.g. "
                        "gradient_outputs=0 for the loss of a function returning (loss, metrics).",
}


def _check_positions(name: str, value) -> tuple[int, ...] | None:
    """Validates `gradient_argnums` / `gradient_outputs`: None, an int or ints, all >= 0."""
    if value is None:
        return None
    def as_index(i):
        if isinstance(i, bool):
            raise TypeError
        return operator.index(i)  # ints and numpy integers

    try:
        if isinstance(value, (str, bytes, collections.abc.Mapping)):
            raise TypeError
        values = tuple(map(as_index, value if isinstance(value, collections.abc.Iterable)
                           else (value,)))
    except TypeError:
        values = None
    if values is None or any(i < 0 for i in values):
        raise ValueError(f"{name} must be None, an int >= 0 or a sequence of them ("
                         + _POSITIONS_EXAMPLE[name].format(value=value))
    return tuple(sorted(set(values)))


def _check_residual_policy(policy, gradient_mode: str):
    if policy is not None and not callable(policy):
        raise TypeError(f"residual_policy must be None or a jax.checkpoint_policies value, got "
                        f"{policy!r}. Fix: e.g. residual_policy="
                        f"jax.checkpoint_policies.dots_saveable.")
    if policy is not None and gradient_mode != "residuals":
        raise ValueError(f"residual_policy chooses the residuals of gradient_mode='residuals'; "
                         f"with gradient_mode={gradient_mode!r} there are none. Fix: drop "
                         f"residual_policy, or use gradient_mode='residuals'.")
    return policy


def _gradient_leaves(argnums: tuple[int, ...] | None, args: tuple,
                     specs: Sequence[arg_specs.LeafSpec]) -> tuple[int, ...] | None:
    """Flat leaf indices of the positional arguments in `argnums` (None: all leaves)."""
    if argnums is None:
        return None
    if argnums and argnums[-1] >= len(args):
        raise errors.GradientSpecError(
            f"gradient_argnums={list(argnums)} names argument {argnums[-1]}, but the function "
            f"was called with {len(args)} positional argument(s). Fix: pass the arguments to "
            f"differentiate positionally and count from 0 over them, as jax.grad's argnums "
            f"does (keyword arguments take no gradient).")
    leaves, start = [], 0
    for i, arg in enumerate(args):
        n = len(jax.tree_util.tree_leaves(arg))
        if i in argnums:
            leaves.extend(range(start, start + n))
        start += n
    if argnums and not any(flat_function.is_differentiable(specs[j].dtype) for j in leaves):
        chosen = ", ".join(f"{specs[j].path}: {specs[j].dtype}" for j in leaves) or "no arrays"
        raise errors.GradientSpecError(
            f"gradient_argnums={list(argnums)} selects no float or complex array ({chosen}), "
            f"so no gradient could be taken. Fix: name the arguments holding the float "
            f"parameters (jax.grad also requires real or complex inputs).")
    return tuple(leaves)


class _Converted:
    """The callable `convert` returns; holds the caches of exports."""

    def __init__(self, fun: Callable, options: _Options, cache_size: int):
        self._fun = fun
        self._options = options
        # By the TF-side signature (concrete shapes when eager) -> DifferentiableFunction whose
        # checks passed for those shapes: a hit skips all Python work but the call.
        self._checked = prepared_export.CheckedSignatures(cache_size)
        self._by_call_signature = self._checked.cache  # its LRU cache (tests read its size)
        # By the exported signature (symbolic dims as strings): all batch sizes share one export.
        self._by_export_signature = export_cache.LruCache(cache_size)
        functools.update_wrapper(self, fun, updated=())
        # TF unwraps `__wrapped__` in places (e.g. tf.function default arguments) and would call
        # the JAX function on TF values; keep the name and docstring only.
        self.__dict__.pop("__wrapped__", None)

    @property
    def jax_function(self) -> Callable:
        """The JAX function converted (call_tf_result_shapes infers a call_tf of it from JAX)."""
        return self._fun

    @property
    def cache_info(self) -> dict:
        """Hits, misses and sizes of the eager export caches (for tests and tuning)."""
        calls, exports = self._by_call_signature, self._by_export_signature
        return {"call_hits": calls.hits, "call_misses": calls.misses,
                "exports": exports.misses, "size": len(exports), "maxsize": exports.maxsize}

    @tf.autograph.experimental.do_not_convert
    def __call__(self, *args, **kwargs):
        args, kwargs = tf_args.unwrap_tf_containers((args, kwargs))
        leaves, treedef = tf_args.flatten_args(args, kwargs)
        eager = tf.executing_eagerly()
        key = (treedef, tuple((leaf.shape, leaf.dtype) for leaf in leaves),
               export_cache.jax_config_key())
        node = self._checked.node(key)
        if node is None:
            node = self._node(args, leaves, treedef)
            if isinstance(node, call_tf_split.SplitFunction):
                return node(leaves)  # call_tf with symbolic shapes: see call_tf_split.
            values, asserts = self._checked.check(key, leaves, node)
        else:
            values, asserts = [leaf.value for leaf in leaves], []
        if not eager:
            values = tf_arguments.named(values, "jax2tf_arg_{}")
        try:
            outputs = gradients.call(node, values, asserts, self._options.with_gradient,
                                     self._options.gradient_order)
        except errors.SymbolicCallTfFound:
            # Its first trace met a call_tf with symbolic shapes: split the function there.
            self._checked.cache.pop(key)
            return self._node(args, leaves, treedef, split=True)(leaves)
        if not eager:
            outputs = tf_arguments.named(outputs, "jax2tf_out")
        return jax.tree_util.tree_unflatten(node.flat.out_tree, outputs)

    def _node(self, args: tuple, leaves: list, treedef, split: bool = False
              ) -> DifferentiableFunction | call_tf_split.SplitFunction:
        options = self._options
        n_positional = len(jax.tree_util.tree_leaves(args))
        scope = options.scope or arg_specs.make_scope(options.constraints)
        specs = arg_specs.leaf_specs(leaves, n_positional, options.polymorphic_shapes, args, scope)
        specs = [dataclasses.replace(s, dtype=jax.dtypes.canonicalize_dtype(s.dtype)) for s in specs]
        export_key = (treedef, tuple((s.path, tuple(map(str, s.shape)), s.dtype) for s in specs),
                      export_cache.jax_config_key())

        def split_function() -> call_tf_split.SplitFunction:
            return call_tf_split.split_at_polymorphic_call_tf(
                self._fun, treedef, specs, options.constraints, self._convert_part,
                with_gradient=options.with_gradient, gradient_outputs=options.gradient_outputs,
                gradient_leaves=_gradient_leaves(options.gradient_argnums, args, specs))

        if split:
            # The export's trace found a symbolic call_tf (SymbolicCallTfFound): replace its node.
            self._by_export_signature.pop(export_key)
            return self._by_export_signature.get_or_compute(export_key, split_function)

        def build() -> DifferentiableFunction | call_tf_split.SplitFunction:
            name = getattr(self._fun, "__name__", "fun")
            structs = [s.struct for s in specs]
            may_split = call_tf_split.may_split(specs)
            try:  # a jax.jit is traced here already, to read its shardings
                with call_tf_split.raising_at_symbolic_call_tf(may_split):
                    declared = shardings.declared(self._fun, treedef, structs)
            except errors.SymbolicCallTfFound:
                return split_function()
            except ValueError as e:
                indivisible = shardings.indivisible_dimension_error(e, specs)
                if indivisible is None:
                    raise
                raise indivisible from e
            body = shardings.body(self._fun, declared)
            if may_split:
                body = call_tf_split.traced_raising_at_symbolic_call_tf(body)
            flat = flat_function.flatten_user_function(
                body, treedef, structs, name,
                gradient_inputs=_gradient_leaves(options.gradient_argnums, args, specs),
                gradient_outputs=options.gradient_outputs)
            # Nothing is exported yet: the call exports what it runs (the primal module when no
            # tape records, the residual forward of the watched inputs when one does).
            return DifferentiableFunction(flat, specs, options.export, options.gradient_mode,
                                          options.constraints, options.residual_policy,
                                          shardings=declared)

        return self._by_export_signature.get_or_compute(export_key, build)

    def _convert_part(self, fun: Callable, polymorphic_shapes: list,
                      scope: jax.export.SymbolicScope) -> "_Converted":
        """`convert(fun)` with these options, for one stretch of a split function."""
        options = dataclasses.replace(self._options, polymorphic_shapes=polymorphic_shapes,
                                      gradient_argnums=None, gradient_outputs=None,
                                      scope=scope)
        return _Converted(fun, options, self._by_export_signature.maxsize)
