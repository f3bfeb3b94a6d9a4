"""Solves dimension variables from a call's actual shapes and checks them against the specs.

TF's XlaCallModule refines the module's shapes before the module's own shape assertions run, so
a call with, say, two arguments sharing `n` at sizes 3 and 4 would fail deep in MLIR with a
dump. We check first: in Python for dimensions known when the call is built (eager calls, or
static dimensions while tracing), and with TF assert ops for dimensions known only at run time.
Each failure names the dimension variable, the argument path and dimension, and the fix.

Solving follows JAX's rule: a variable is set by a dimension that is the variable itself, or a
linear term `k*v + c` in one unknown variable. Dimensions that cannot be solved this way are
checked by the module itself.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import tensorflow as tf

from jax2tf_native import _jax_internals, dim_expressions
from jax2tf_native.arg_specs import LeafSpec
from jax2tf_native.errors import ArgumentShapeError, PolymorphicShapeError

_CONSTRAINT_RE = re.compile(r"^(.*?)(>=|<=|==)(.*)$")


@dataclasses.dataclass(frozen=True)
class _Dim:
    path: str          # "args[0]"
    index: int         # dimension index
    expr: str          # "2*b"
    spec: str          # the user's string for the whole argument
    actual: Any        # int, or a scalar int tensor when unknown while tracing

    @property
    def where(self) -> str:
        return f"{self.path}.shape[{self.index}]"


def _symbolic_dims(specs: Sequence[LeafSpec], actual_shapes: Sequence[Sequence[Any]]) -> list[_Dim]:
    dims = []
    for spec, actual in zip(specs, actual_shapes):
        for i, d in enumerate(spec.shape):
            if not isinstance(d, int):
                dims.append(_Dim(spec.path, i, str(d), spec.spec or "", actual[i]))
    return dims


def _fail(message: str):
    raise ArgumentShapeError(message)


def _check(ok, message: str, asserts: list | None, values: Sequence = ()) -> None:
    """Checks a condition now if it is a Python bool, else adds a TF assertion (none when
    `asserts` is None).

    `values` are (label, value) pairs that the TF assertion prints at run time.
    """
    if dim_expressions.is_tensor(ok):
        if asserts is None:
            return
        data = [message]
        for label, value in values:
            data += [f"{label} =", value]
        asserts.append(tf.debugging.Assert(ok, data, summarize=8))
    elif not ok:
        _fail(message)


# JAX's own shape-assertion phrases (jax.export), which jax2tf users see from the module and
# match on: each message of ours starts with one, then names the argument and the fix.
SPEC_MISMATCH = "Input shapes do not match the polymorphic shapes specification."
CONSTRAINT_MISMATCH = "Input shapes do not match the symbolic shape constraint"

_FIX = ("Fix: call with shapes that satisfy polymorphic_shapes, or give the dimensions "
        "different dimension variables if they may differ.")


def solve_and_check(specs: Sequence[LeafSpec], actual_shapes: Sequence[Sequence[Any]],
                    constraints: Sequence[str] = (), graph_asserts: bool = True) -> list:
    """Checks actual shapes against the specs; returns TF assert ops for run-time dimensions
    (none with `graph_asserts=False`: what is known now is still checked).

    Args:
      specs: the exported spec of each flat argument.
      actual_shapes: per argument, each dimension as an int (known now) or a scalar TF tensor.
      constraints: the user's `polymorphic_constraints` strings.

    Raises:
      ArgumentShapeError: a rank or constant dimension differs, or known dimensions contradict a
        dimension variable, its >= 1 bound, or a constraint.
      PolymorphicShapeError: JAX cannot solve the specs' dimension variables (JAX's text).
    """
    for spec, actual in zip(specs, actual_shapes):
        if len(actual) != len(spec.shape):
            _fail(f"{SPEC_MISMATCH} {spec.path} has rank {len(actual)} (shape {_fmt(actual)}), but the function "
                  f"was converted for rank {len(spec.shape)} (shape {_fmt(spec.shape)}). Fix: "
                  f"pass an array of rank {len(spec.shape)}, or convert again for this rank.")
        for i, (want, got) in enumerate(zip(spec.shape, actual)):
            if isinstance(want, int) and isinstance(got, int) and want != got:
                _fail(f"{SPEC_MISMATCH} {spec.path}.shape[{i}] is {got}, but the function was converted for "
                      f"{want} there (shape {_fmt(spec.shape)}). Fix: pass shape "
                      f"{_fmt(spec.shape)}, or make that dimension symbolic in "
                      f"polymorphic_shapes.")
    unsolvable = _jax_internals.jax_unsolvable_message([s.struct for s in specs])
    if unsolvable is not None:
        raise unsolvable_error(specs, _named(unsolvable, specs))
    try:
        return _solve_and_check(specs, actual_shapes, constraints, graph_asserts)
    except ArgumentShapeError as e:
        raise _with_jax_text(e, specs, actual_shapes) from None


def unsolvable_error(specs: Sequence[LeafSpec], jax_message: str) -> PolymorphicShapeError:
    """Our error for specs whose dimension variables JAX cannot solve, with JAX's text."""
    given = "; ".join(f"{s.path}: {s.spec!r}" for s in specs if s.spec)
    return PolymorphicShapeError(
        f"JAX cannot compute the dimension variables from the input shapes ({given}): "
        f"{jax_message} Fix: give every dimension variable a dimension that is the variable "
        f"alone or a linear term like '2*b' or 'b + 1' in some argument.")


def _named(jax_message: str, specs: Sequence[LeafSpec]) -> str:
    """JAX's message with the arguments' own paths for its flat `args[i]`."""
    return re.sub(r"args\[(\d+)\](?=\.shape)", lambda m: specs[int(m[1])].path, jax_message)


def _with_jax_text(error: ArgumentShapeError, specs, actual_shapes) -> ArgumentShapeError:
    """A failed check of known sizes, led by the text JAX's own shape assertion gives for them
    (what jax2tf raises, to the character), then ours: what is wrong in words, and the fix."""
    text = str(error)
    known = all(isinstance(d, int) for shape in actual_shapes for d in shape)
    if not (known and text.startswith(SPEC_MISMATCH) and ": " in text):
        return error
    jax_text = _jax_internals.jax_shape_assertion_message([s.struct for s in specs],
                                                          actual_shapes)
    if jax_text is None:
        return error
    return ArgumentShapeError(f"{_named(jax_text, specs)} In short: {text.split(': ', 1)[1]}")


def _solve_and_check(specs, actual_shapes, constraints, graph_asserts: bool) -> list:
    asserts: list | None = [] if graph_asserts else None
    dims = _symbolic_dims(specs, actual_shapes)
    if not graph_asserts:  # only what is known now: no op for run-time sizes
        dims = [dim for dim in dims if dim.actual is not None and not dim_expressions.is_tensor(dim.actual)]
    env: dict[str, Any] = {}
    source: dict[str, _Dim] = {}
    progress = True
    while progress:
        progress = False
        for dim in dims:
            try:
                dim_expressions.evaluate(dim.expr, env)
                continue
            except dim_expressions.Unknown:
                pass
            except dim_expressions.NonLinear:
                continue
            try:
                linear = dim_expressions.evaluate(dim.expr, env, unknown=lambda v: dim_expressions.Linear({v: 1}, 0))
            except (dim_expressions.NonLinear, dim_expressions.Unknown):
                continue
            linear = linear if isinstance(linear, dim_expressions.Linear) else dim_expressions.Linear({}, linear)
            unknowns = [v for v, k in linear.coeffs.items() if k != 0]
            if len(unknowns) != 1:
                continue
            var = unknowns[0]
            k = linear.coeffs[var]
            rest = dim.actual - linear.const
            remainder = tf.math.floormod(rest, k) if dim_expressions.is_tensor(rest) else rest % k
            _check(tf.equal(remainder, 0) if dim_expressions.is_tensor(rest) else remainder == 0,
                   f"{SPEC_MISMATCH} Division had remainder {_show(remainder)} when computing "
                   f"the value of '{var}': "
                   f"{dim.where} = {dim.actual if not dim_expressions.is_tensor(dim.actual) else '(run time)'} "
                   f"cannot equal {dim.expr} for an integer dimension variable `{var}` "
                   f"(spec {dim.spec} of {dim.path}). {_FIX}", asserts,
                   [(dim.where, dim.actual)])
            env[var] = tf.math.floordiv(rest, k) if dim_expressions.is_tensor(rest) else rest // k
            source[var] = dim
            progress = True
    for var, value in env.items():
        src = source[var]
        _check(tf.greater_equal(value, 1) if dim_expressions.is_tensor(value) else value >= 1,
               f"{SPEC_MISMATCH} Expected value >= 1 for dimension variable '{var}': "
               f"dimension variable `{var}` must be >= 1, but {src.where} = "
               f"{_show(src.actual)} gives {var} = {_show(value)} (spec {src.spec} of "
               f"{src.path}). {_FIX}", asserts, [(src.where, src.actual), (var, value)])
    for dim in dims:
        try:
            expected = dim_expressions.evaluate(dim.expr, env)
        except (dim_expressions.Unknown, dim_expressions.NonLinear):
            continue
        if source.get(dim.expr) is dim:
            continue
        names = sorted(set(re.findall(r"[A-Za-z_]\w*", dim.expr)) - {"floordiv", "mod", "max", "min", "non_negative"})
        origin = "; ".join(f"`{v}` = {_show(env[v])} from {source[v].where}"
                           for v in names if v in source)
        ok = (tf.equal(tf.cast(dim.actual, tf.int64), tf.cast(expected, tf.int64))
              if dim_expressions.is_tensor(dim.actual) or dim_expressions.is_tensor(expected) else dim.actual == expected)
        _check(ok, f"{SPEC_MISMATCH} Found inconsistency between dimension size {dim.where} "
                   f"(= {_show(dim.actual)}) and the specification '{dim.expr}' "
                   f"(= {_show(expected)}): "
                   f"{dim.where} = {_show(dim.actual)}, but polymorphic shape {dim.spec} of "
                   f"{dim.path} requires it to equal {dim.expr} = {_show(expected)} (dimension "
                   f"variable {origin}). {_FIX}", asserts,
                   [(dim.where, dim.actual), (dim.expr, expected)])
    for constraint in constraints:
        m = _CONSTRAINT_RE.match(constraint.strip())
        if not m:
            continue
        lhs, op, rhs = m.groups()
        try:
            a, b = dim_expressions.evaluate(lhs.strip(), env), dim_expressions.evaluate(rhs.strip(), env)
        except (dim_expressions.Unknown, dim_expressions.NonLinear):
            continue
        if dim_expressions.is_tensor(a) or dim_expressions.is_tensor(b):
            a, b = tf.cast(a, tf.int64), tf.cast(b, tf.int64)
            ok = {">=": tf.greater_equal, "<=": tf.less_equal, "==": tf.equal}[op](a, b)
        else:
            ok = {">=": a >= b, "<=": a <= b, "==": a == b}[op]
        values = ", ".join(f"{v} = {_show(env[v])}" for v in sorted(env))
        _check(ok, f"{CONSTRAINT_MISMATCH} {constraint.strip()}: "
                   f"the call breaks polymorphic constraint `{constraint}` ({values}). Fix: call "
                   f"with shapes that satisfy it, or relax polymorphic_constraints.", asserts,
                   [(v, env[v]) for v in sorted(env)])
    return asserts or []


def _show(x) -> str:
    return "(known at run time)" if dim_expressions.is_tensor(x) else str(x)


def _fmt(shape) -> str:
    dims = ["?" if d is None or dim_expressions.is_tensor(d) else str(d) for d in shape]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"
