"""`call_tf` under polymorphic shapes: the converted function is split at its TF calls.

A module cannot hold a TF function whose result shape is symbolic (TF 2.21: the inlined form
needs static shapes, the `call_tf_graph=True` custom call is rejected by XlaCallModule's shape
refinement). So, when a converted function calls `call_tf` with symbolic shapes, it is traced
to a jaxpr (the results get the shapes TF infers, `call_tf_result_shapes`), the calls are found at its
top level (through `jax.jit`, `jax.checkpoint` and `call_tf`'s own `custom_vjp`, which are
inlined), and each stretch of JAX between them is converted on its own (one XlaCallModule op
each, with the normal gradients), while the TF function runs as ordinary TF ops on the tensors
in between. TF chains
the pieces: values and gradients (TF's own for the TF function, as `call_tf` uses) flow as in
one function, eagerly, in `tf.function` with a `None` batch and in SavedModels.

A symbolic `call_tf` inside `lax.scan`, `lax.cond`, `lax.while_loop` or a user `custom_vjp` /
`custom_jvp` cannot be split out: `CallTfShapeError` says so and the fix. (`jax.checkpoint`
around one is inlined, losing only its rematerialization.)
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np
import tensorflow as tf
from jax.extend import core as jex_core

from jax2tf_native import _jax_internals, gradients, prepared_export
from jax2tf_native.call_tf_result_shapes import OutputShapeResolver
from jax2tf_native.errors import CallTfShapeError, SymbolicCallTfFound
from jax2tf_native.arg_specs import LeafSpec
from tf_ops import arguments as tf_arguments
from tf_ops import dtypes as tf_dtypes
from tf_ops import gradient_ops

# Calls inlined when they hold a symbolic call_tf. jax.checkpoint's ("remat2") too: the values
# and gradients are the same, only its rematerialization is lost around the TF call.
_CALLS = ("jit", "pjit", "closed_call", "core_call", "remat2", "checkpoint")


def may_split(specs: Sequence[LeafSpec]) -> bool:
    """Whether a function with these arguments could hold a symbolic call_tf: jax2tf imported
    and some argument shape symbolic. Only then does its trace need `raising_at_symbolic_call_tf`."""
    return _jax_internals.call_tf_primitive() is not None and _symbolic([s.struct for s in specs])


def _raise_if_symbolic(avals, params):
    if _symbolic(avals) or _symbolic(_jax_internals.call_tf_params(params).output_avals or ()):
        raise SymbolicCallTfFound("a call_tf with symbolic shapes")
    return None  # static shapes: the peer's own evaluation applies


@contextlib.contextmanager
def raising_at_symbolic_call_tf(active: bool = True) -> Iterator[None]:
    """In this scope (when `active`), tracing a call_tf with symbolic shapes raises
    `SymbolicCallTfFound`.

    This way a function without one is traced once, by its export; only a function with one is
    traced again, to be split (before, every polymorphic function was traced an extra time to
    look for call_tf whenever jax2tf had been imported).
    """
    if not active:
        yield
        return
    with _jax_internals.resolving_call_tf_output_avals(_raise_if_symbolic):
        yield


def traced_raising_at_symbolic_call_tf(fun: Callable) -> Callable:
    """`fun`, whose every trace runs in `raising_at_symbolic_call_tf()`."""
    def traced(*args, **kwargs):
        with raising_at_symbolic_call_tf():
            return fun(*args, **kwargs)

    return traced


def _symbolic(avals) -> bool:
    return any(not isinstance(d, int) for a in avals for d in getattr(a, "shape", ()))


def _is_symbolic_call_tf(eqn, primitive) -> bool:
    return eqn.primitive is primitive and _symbolic(
        [v.aval for v in eqn.invars] + [v.aval for v in eqn.outvars])


def _symbolic_call_tf_inside(eqn, primitive):
    """The first call_tf equation with symbolic shapes nested in `eqn`, None if none."""
    for sub in jex_core.jaxprs_in_params(eqn.params):
        for e in sub.eqns:
            if _is_symbolic_call_tf(e, primitive):
                return e
            found = _symbolic_call_tf_inside(e, primitive)
            if found is not None:
                return found
    return None


def peer_phrase(output_shape_dtype_declared: bool) -> str:
    """What jax2tf says for a call_tf result of symbolic shape it cannot run: without
    `output_shape_dtype`, its abstract evaluation refuses the dynamic shape; with it, compiling
    the TF function at symbolic shapes fails. Our `CallTfShapeError`s start with it."""
    return ("Error compiling TensorFlow function" if output_shape_dtype_declared
            else "call_tf cannot call functions whose output has dynamic shape")


def _holds_symbolic_call_tf(eqn, primitive) -> bool:
    return any(_is_symbolic_call_tf(e, primitive) or _holds_symbolic_call_tf(e, primitive)
               for sub in jex_core.jaxprs_in_params(eqn.params) for e in sub.eqns)


@dataclasses.dataclass
class _Step:
    eqn: Any
    ins: list       # value ids (int) or jax Literals
    outs: list[int]
    is_tf: bool


class _Program:
    """The function as a flat list of steps over numbered values, calls to inline inlined."""

    def __init__(self, primitive):
        self.primitive = primitive
        self.avals: list = []
        self.consts: dict[int, Any] = {}
        self.steps: list[_Step] = []

    def new(self, aval) -> int:
        self.avals.append(aval)
        return len(self.avals) - 1

    def add(self, jaxpr, consts, in_refs: Sequence) -> list:
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = self.new(v.aval)
            self.consts[env[v]] = c
        env.update(zip(jaxpr.invars, in_refs))
        read = lambda a: a if isinstance(a, jex_core.Literal) else env[a]
        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.invars]
            inner = self._inlined(eqn)
            if inner is not None:
                outs = self.add(inner.jaxpr, inner.consts, ins)
            else:
                outs = [self.new(v.aval) for v in eqn.outvars]
                self.steps.append(_Step(eqn, ins, outs,
                                        _is_symbolic_call_tf(eqn, self.primitive)))
            env.update(zip(eqn.outvars, outs))
        return [read(a) for a in jaxpr.outvars]

    def _inlined(self, eqn):
        """The closed jaxpr to inline in place of `eqn`, None to keep it as one step."""
        if not _holds_symbolic_call_tf(eqn, self.primitive):
            return None
        name = eqn.primitive.name
        if name in _CALLS:
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            return inner if isinstance(inner, jex_core.ClosedJaxpr) else \
                jex_core.ClosedJaxpr(inner, ())
        inner = eqn.params.get("call_jaxpr")
        if (name == "custom_vjp_call" and len(inner.jaxpr.eqns) == 1
                and inner.jaxpr.eqns[0].primitive is self.primitive):
            return inner  # call_tf's own custom_vjp: its backward is TF's gradient, as here.
        what = ("a custom_vjp/custom_jvp of your own (its rule would be lost)"
                if name.startswith("custom_") else f"`{name}` (lax.scan, lax.cond, "
                f"lax.while_loop, ...)")
        inside = _symbolic_call_tf_inside(eqn, self.primitive)
        declared = inside is not None and inside.params.get("output_avals") is not None
        raise CallTfShapeError(
            f"{peer_phrase(declared)}: "
            f"a call_tf with polymorphic shapes sits inside {what}; jax2tf_native can split a "
            f"converted function only at call_tf calls outside control flow (each TF call runs "
            f"between two exported modules, and a module cannot hold a TF function of symbolic "
            f"shape). Expected the call at the top level or in jax.jit. Fix: move the call_tf "
            f"out of the {name}, give it static shapes there (e.g. convert with static shapes), "
            f"or declare nothing dynamic inside.")


@dataclasses.dataclass
class _Stage:
    run: Callable       # JAX part: a converted function; TF part: jax2tf's flat TF callable
    ins: list           # value ids or Literals
    outs: list[int]
    is_tf: bool


def _spec_string(aval) -> str | None:
    if not _symbolic([aval]):
        return None
    dims = ", ".join(map(str, aval.shape))
    return f"({dims},)" if len(aval.shape) == 1 else f"({dims})"


def _shape_text(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _bare_variables(avals) -> set[str]:
    return {str(d) for a in avals for d in a.shape
            if not isinstance(d, int) and str(d).isidentifier()}


def _segment_function(program: _Program, steps: list[_Step], in_ids: list[int],
                      out_ids: list[int], name: str) -> Callable:
    def segment(*xs):
        env = dict(program.consts)
        env.update(zip(in_ids, xs))
        for step in steps:
            values = [a.val if isinstance(a, jex_core.Literal) else env[a] for a in step.ins]
            env.update(zip(step.outs, _jax_internals.bind_equation(step.eqn, values)))
        return tuple(env[i] for i in out_ids)

    segment.__name__ = segment.__qualname__ = name
    return segment


class SplitFunction:
    """A converted function split at its polymorphic call_tf calls (see the module docstring).

    `converter._Converted` returns it in place of a `DifferentiableFunction` and calls it.
    """

    def __init__(self, program: _Program, in_ids: list[int], out_refs: list, out_tree,
                 specs: Sequence[LeafSpec], constraints: Sequence[str], name: str,
                 convert_part: Callable, with_gradient: bool,
                 gradient_leaves: tuple[int, ...] | None, gradient_outputs):
        self.specs, self.constraints = list(specs), tuple(constraints)
        self._in_ids, self._out_refs, self._out_tree = in_ids, out_refs, out_tree
        self._with_gradient, self._gradient_leaves = with_gradient, gradient_leaves
        self._cut_outputs = _cut_output_leaves(out_tree, gradient_outputs)
        self._avals, self._consts = program.avals, program.consts
        self.stages = self._stages(program, name, convert_part)

    def _stages(self, program: _Program, name: str, convert_part: Callable) -> list[_Stage]:
        groups: list[list[_Step]] = []
        for step in program.steps:
            if step.is_tf or not groups or groups[-1][-1].is_tf:
                groups.append([step])
            else:
                groups[-1].append(step)
        # Values each group reads from outside itself, and the program's results: what must
        # leave the groups before.
        needed_after = [set() for _ in groups] + [{r for r in self._out_refs
                                                   if isinstance(r, int)}]
        for k in range(len(groups) - 1, -1, -1):
            reads = {a for s in groups[k] for a in s.ins if isinstance(a, int)}
            defined = {o for s in groups[k] for o in s.outs}
            needed_after[k] = (needed_after[k + 1] - defined) | (reads - defined)
        symbolic_inputs = [i for i in self._in_ids if _symbolic([program.avals[i]])]
        variables = set().union(*(_jax_internals.dimension_variables(d)
                                  for i in symbolic_inputs for d in program.avals[i].shape))
        scope = next(d.scope for i in symbolic_inputs for d in program.avals[i].shape
                     if not isinstance(d, int))
        stages = []
        for k, group in enumerate(groups):
            defined = {o for s in group for o in s.outs}
            outs = sorted(defined & needed_after[k + 1])
            if group[0].is_tf:
                stages.append(_Stage(_jax_internals.call_tf_params(group[0].eqn.params).callable_flat_tf, group[0].ins,
                                     group[0].outs, True))
                continue
            if not outs:
                continue  # Nothing later reads it.
            reads = [a for s in group for a in s.ins if isinstance(a, int)]
            ins = sorted({a for a in reads if a not in defined and a not in program.consts})
            if not variables <= _bare_variables([program.avals[i] for i in ins]):
                # jax.export needs every dimension variable readable from an input shape.
                ins += [i for i in symbolic_inputs if i not in ins]
            part = _segment_function(program, group, ins, outs, f"{name}_part{len(stages)}")
            shapes = [_spec_string(program.avals[i]) for i in ins]
            stages.append(_Stage(convert_part(part, shapes, scope), ins, outs, False))
        return stages

    def __call__(self, leaves: Sequence) -> Any:
        values, asserts = prepared_export.check_args(self.specs, leaves, self.constraints)
        if asserts:
            with tf.control_dependencies(asserts):
                values = [tf.identity(v) for v in values]
        if not tf.executing_eagerly():
            values = tf_arguments.named(values, "jax2tf_arg_{}")
        if self._gradient_leaves is not None:
            values = gradient_ops.cut_gradients(values, keep=self._gradient_leaves)
        env = dict(zip(self._in_ids, values))

        def read(a):
            if isinstance(a, jex_core.Literal):
                return tf.constant(a.val)
            # A constant of the function read by a TF call or returned as a result.
            return env[a] if a in env else tf.constant(np.asarray(self._consts[a]))

        for stage in self.stages:
            outs = stage.run(*[read(a) for a in stage.ins])
            if stage.is_tf:
                self._check_declared_shapes(stage, outs, values)
                outs = [tf.cast(o, self._tf_dtype(i)) for o, i in zip(outs, stage.outs)]
            env.update(zip(stage.outs, outs))
        outputs = [read(r) for r in self._out_refs]
        outputs = gradient_ops.cut_gradients(
            outputs, keep=[i for i in range(len(outputs)) if i not in self._cut_outputs])
        if not self._with_gradient:
            outputs = gradient_ops.prevent_gradient(outputs, gradients.PREVENT_GRADIENT_MESSAGE)
        if not tf.executing_eagerly():
            outputs = tf_arguments.named(outputs, "jax2tf_out")
        return jax.tree_util.tree_unflatten(self._out_tree, outputs)

    def _check_declared_shapes(self, stage: _Stage, outs: Sequence, values: Sequence) -> None:
        """A TF call's results against the shapes its `output_shape_dtype` declares, at the
        sizes the call's arguments give (when they are known now: eagerly, or traced at static
        shapes). Else the next module's input checks would blame its arguments."""
        actual = [v.shape.as_list() for v in values]
        if any(d is None for shape in actual for d in shape):
            return
        declared = [self._avals[i].shape for i in stage.outs]
        wanted = _jax_internals.jax_dimension_sizes([s.struct for s in self.specs], actual,
                                                    declared)
        for out, shape, want in zip(outs, declared, wanted):
            got = out.shape.as_list()
            if len(got) == len(want) and all(g is None or g == w for g, w in zip(got, want)):
                continue
            raise CallTfShapeError(
                f"{peer_phrase(True)}: the TensorFlow function called by call_tf returns "
                f"shape {got}, where its output_shape_dtype declares {_shape_text(shape)} "
                f"= {want} for these arguments. The shapes or dtypes returned by the "
                f"TensorFlow function do not match the declared output_shape_dtype. Fix: "
                f"declare the shape the TensorFlow function returns in output_shape_dtype.")

    def _tf_dtype(self, value_id: int) -> tf.DType:
        return tf_dtypes.to_tf_dtype(self._avals[value_id].dtype)


def _cut_output_leaves(out_tree, gradient_outputs) -> set[int]:
    """Flat result leaves outside `gradient_outputs` (positions in a result tuple or list)."""
    if gradient_outputs is None:
        return set()
    result = jax.tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    positions = result if isinstance(result, (tuple, list)) else [result]
    return {leaf for p, part in enumerate(positions) if p not in gradient_outputs
            for leaf in jax.tree_util.tree_leaves(part)}


def split_at_polymorphic_call_tf(fun: Callable, treedef, specs: Sequence[LeafSpec],
                                 constraints: Sequence[str], convert_part: Callable, *,
                                 with_gradient: bool = True,
                                 gradient_leaves: tuple[int, ...] | None = None,
                                 gradient_outputs=None) -> SplitFunction:
    """`fun` as a `SplitFunction`: JAX stretches converted on their own, its symbolic
    `call_tf`s run as TF ops in between.

    Args:
      fun: the user's JAX function, called as `fun(*args, **kwargs)` of `treedef`'s pytree.
      treedef: the pytree definition of `(args, kwargs)`.
      specs: the flat arguments' specifications (symbolic shapes).
      constraints: the dimension-variable constraints, as given to `convert`.
      convert_part: `(jax_function, polymorphic_shapes, scope) -> TF function`, how each
        stretch of JAX between TF calls is converted (`convert` with the caller's options, the
        dimension variables in `scope`, the scope of `specs`).
      with_gradient, gradient_leaves, gradient_outputs: as `convert`'s options, in flat form.

    Called once the normal export's trace met a symbolic call_tf (`SymbolicCallTfFound`).

    Raises:
      CallTfShapeError: a call_tf result whose shape TF cannot say, or a symbolic call_tf in
        control flow.
    """
    primitive = _jax_internals.call_tf_primitive()
    out_trees = []

    def flat(*leaves):
        args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
        out, out_tree = jax.tree_util.tree_flatten(fun(*args, **kwargs))
        out_trees.append(out_tree)
        return out

    # The user's own errors in this trace propagate as they are.
    with _jax_internals.resolving_call_tf_output_avals(OutputShapeResolver()):
        closed = jax.make_jaxpr(flat)(*[s.struct for s in specs])
    program = _Program(primitive)
    in_ids = [program.new(v.aval) for v in closed.jaxpr.invars]
    out_refs = program.add(closed.jaxpr, closed.consts, in_ids)
    return SplitFunction(program, in_ids, out_refs, out_trees[-1], specs, constraints,
                         getattr(fun, "__name__", "fun"), convert_part, with_gradient,
                         gradient_leaves, gradient_outputs)
