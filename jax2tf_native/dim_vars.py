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

import ast
import dataclasses
import re
from typing import Any, Callable, Sequence

import tensorflow as tf

from jax2tf_native.errors import ArgumentShapeError
from jax2tf_native.poly_specs import LeafSpec

_CONSTRAINT_RE = re.compile(r"^(.*?)(>=|<=|==)(.*)$")


class _Unknown(Exception):
    """An expression refers to a variable not solved yet."""


class _NonLinear(Exception):
    """An expression is not linear in its unknown variables."""


@dataclasses.dataclass
class _Linear:
    """coefficient * variable + constant, with the constant possibly a TF tensor."""
    coeffs: dict
    const: Any

    def _lift(self, other):
        return other if isinstance(other, _Linear) else _Linear({}, other)

    def __add__(self, other):
        other = self._lift(other)
        coeffs = dict(self.coeffs)
        for v, k in other.coeffs.items():
            coeffs[v] = coeffs.get(v, 0) + k
        return _Linear(coeffs, self.const + other.const)

    __radd__ = __add__

    def __neg__(self):
        return _Linear({v: -k for v, k in self.coeffs.items()}, -self.const)

    def __sub__(self, other):
        return self + (-self._lift(other))

    def __rsub__(self, other):
        return self._lift(other) - self

    def __mul__(self, other):
        other = self._lift(other)
        if self.coeffs and other.coeffs:
            raise _NonLinear()
        if other.coeffs:
            return other * self.const
        if not isinstance(other.const, int):
            raise _NonLinear()
        return _Linear({v: k * other.const for v, k in self.coeffs.items()},
                       self.const * other.const)

    __rmul__ = __mul__


class _PyOps:
    floordiv = staticmethod(lambda a, b: a // b)
    mod = staticmethod(lambda a, b: a % b)
    max = staticmethod(max)
    min = staticmethod(min)
    non_negative = staticmethod(lambda a: max(a, 0))


def _is_tensor(x) -> bool:
    return isinstance(x, tf.Tensor)


def _tf_or_py(tf_fn, py_fn):
    return lambda *xs: tf_fn(*xs) if any(_is_tensor(x) for x in xs) else py_fn(*xs)


class _MixedOps:
    floordiv = staticmethod(_tf_or_py(tf.math.floordiv, lambda a, b: a // b))
    mod = staticmethod(_tf_or_py(tf.math.floormod, lambda a, b: a % b))
    max = staticmethod(_tf_or_py(tf.maximum, max))
    min = staticmethod(_tf_or_py(tf.minimum, min))
    non_negative = staticmethod(_tf_or_py(lambda a: tf.maximum(a, 0), lambda a: max(a, 0)))


def evaluate(expr: str, env: dict, ops=_MixedOps, unknown: Callable[[str], Any] | None = None):
    """Evaluates a JAX dimension expression string (as `str(dim)` prints it)."""
    tree = ast.parse(expr.replace("^", "**"), mode="eval")

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if unknown is not None:
                return unknown(node.id)
            raise _Unknown(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(a, _Linear) or isinstance(b, _Linear):
                if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
                    return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b,
                            ast.Mult: lambda: a * b}[type(node.op)]()
                raise _NonLinear()
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Pow):
                return a ** b
            if isinstance(node.op, ast.FloorDiv):
                return ops.floordiv(a, b)
            if isinstance(node.op, ast.Mod):
                return ops.mod(a, b)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and hasattr(ops, node.func.id)):
            values = [ev(a) for a in node.args]
            if any(isinstance(v, _Linear) for v in values):
                raise _NonLinear()
            return getattr(ops, node.func.id)(*values)
        raise _NonLinear()

    return ev(tree)


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


def _check(ok, message: str, asserts: list, values: Sequence = ()) -> None:
    """Checks a condition now if it is a Python bool, else adds a TF assertion.

    `values` are (label, value) pairs that the TF assertion prints at run time.
    """
    if _is_tensor(ok):
        data = [message]
        for label, value in values:
            data += [f"{label} =", value]
        asserts.append(tf.debugging.Assert(ok, data, summarize=8))
    elif not ok:
        _fail(message)


_FIX = ("Fix: call with shapes that satisfy polymorphic_shapes, or give the dimensions "
        "different dimension variables if they may differ.")


def solve_and_check(specs: Sequence[LeafSpec], actual_shapes: Sequence[Sequence[Any]],
                    constraints: Sequence[str] = ()) -> list:
    """Checks actual shapes against the specs; returns TF assert ops for run-time dimensions.

    Args:
      specs: the exported spec of each flat argument.
      actual_shapes: per argument, each dimension as an int (known now) or a scalar TF tensor.
      constraints: the user's `polymorphic_constraints` strings.

    Raises:
      ArgumentShapeError: a rank or constant dimension differs, or known dimensions contradict a
        dimension variable, its >= 1 bound, or a constraint.
    """
    asserts: list = []
    for spec, actual in zip(specs, actual_shapes):
        if len(actual) != len(spec.shape):
            _fail(f"{spec.path} has rank {len(actual)} (shape {_fmt(actual)}), but the function "
                  f"was converted for rank {len(spec.shape)} (shape {_fmt(spec.shape)}). Fix: "
                  f"pass an array of rank {len(spec.shape)}, or convert again for this rank.")
        for i, (want, got) in enumerate(zip(spec.shape, actual)):
            if isinstance(want, int) and isinstance(got, int) and want != got:
                _fail(f"{spec.path}.shape[{i}] is {got}, but the function was converted for "
                      f"{want} there (shape {_fmt(spec.shape)}). Fix: pass shape "
                      f"{_fmt(spec.shape)}, or make that dimension symbolic in "
                      f"polymorphic_shapes.")
    dims = _symbolic_dims(specs, actual_shapes)
    env: dict[str, Any] = {}
    source: dict[str, _Dim] = {}
    progress = True
    while progress:
        progress = False
        for dim in dims:
            try:
                evaluate(dim.expr, env)
                continue
            except _Unknown:
                pass
            except _NonLinear:
                continue
            try:
                linear = evaluate(dim.expr, env, unknown=lambda v: _Linear({v: 1}, 0))
            except (_NonLinear, _Unknown):
                continue
            linear = linear if isinstance(linear, _Linear) else _Linear({}, linear)
            unknowns = [v for v, k in linear.coeffs.items() if k != 0]
            if len(unknowns) != 1:
                continue
            var = unknowns[0]
            k = linear.coeffs[var]
            rest = dim.actual - linear.const
            _check(tf.equal(tf.math.floormod(rest, k), 0) if _is_tensor(rest) else rest % k == 0,
                   f"{dim.where} = {dim.actual if not _is_tensor(dim.actual) else '(run time)'} "
                   f"cannot equal {dim.expr} for an integer dimension variable `{var}` "
                   f"(spec {dim.spec} of {dim.path}). {_FIX}", asserts,
                   [(dim.where, dim.actual)])
            env[var] = tf.math.floordiv(rest, k) if _is_tensor(rest) else rest // k
            source[var] = dim
            progress = True
    for var, value in env.items():
        src = source[var]
        _check(tf.greater_equal(value, 1) if _is_tensor(value) else value >= 1,
               f"Dimension variable `{var}` must be >= 1, but {src.where} = "
               f"{_show(src.actual)} gives {var} = {_show(value)} (spec {src.spec} of "
               f"{src.path}). {_FIX}", asserts, [(src.where, src.actual), (var, value)])
    for dim in dims:
        try:
            expected = evaluate(dim.expr, env)
        except (_Unknown, _NonLinear):
            continue
        if source.get(dim.expr) is dim:
            continue
        names = sorted(set(re.findall(r"[A-Za-z_]\w*", dim.expr)) - {"floordiv", "mod", "max", "min", "non_negative"})
        origin = "; ".join(f"`{v}` = {_show(env[v])} from {source[v].where}"
                           for v in names if v in source)
        ok = (tf.equal(tf.cast(dim.actual, tf.int64), tf.cast(expected, tf.int64))
              if _is_tensor(dim.actual) or _is_tensor(expected) else dim.actual == expected)
        _check(ok, f"{dim.where} = {_show(dim.actual)}, but polymorphic shape {dim.spec} of "
                   f"{dim.path} requires it to equal {dim.expr} = {_show(expected)} (dimension "
                   f"variable {origin}). {_FIX}", asserts,
                   [(dim.where, dim.actual), (dim.expr, expected)])
    for constraint in constraints:
        m = _CONSTRAINT_RE.match(constraint.strip())
        if not m:
            continue
        lhs, op, rhs = m.groups()
        try:
            a, b = evaluate(lhs.strip(), env), evaluate(rhs.strip(), env)
        except (_Unknown, _NonLinear):
            continue
        if _is_tensor(a) or _is_tensor(b):
            a, b = tf.cast(a, tf.int64), tf.cast(b, tf.int64)
            ok = {">=": tf.greater_equal, "<=": tf.less_equal, "==": tf.equal}[op](a, b)
        else:
            ok = {">=": a >= b, "<=": a <= b, "==": a == b}[op]
        values = ", ".join(f"{v} = {_show(env[v])}" for v in sorted(env))
        _check(ok, f"The call breaks polymorphic constraint `{constraint}` ({values}). Fix: call "
                   f"with shapes that satisfy it, or relax polymorphic_constraints.", asserts,
                   [(v, env[v]) for v in sorted(env)])
    return asserts


def _show(x) -> str:
    return "(known at run time)" if _is_tensor(x) else str(x)


def _fmt(shape) -> str:
    dims = ["?" if d is None or _is_tensor(d) else str(d) for d in shape]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"
