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


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|//|[-+*%^(),]))")


def _tokens(expr: str) -> list[tuple[str, Any]]:
    """("int", 2) / ("name", "b") / ("op", "*") tokens of a dimension expression.

    Names are any identifiers, Python keywords included: Keras names unknown dimensions
    `a ... z, aa, ab, ...`, so `as`, `if` and `in` are dimension variables there, as in JAX."""
    tokens, pos, expr = [], 0, expr.rstrip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise _NonLinear()  # not an expression we know: the module checks it
        number, name, op = m.groups()
        tokens.append(("int", int(number)) if number is not None else
                      ("name", name) if name is not None else ("op", op))
        pos = m.end()
    return tokens


def evaluate(expr: str, env: dict, ops=_MixedOps, unknown: Callable[[str], Any] | None = None):
    """Evaluates a JAX dimension expression string (as `str(dim)` prints it, or a constraint
    side): integers, names, `+ - * // % ^ **`, unary minus, parentheses and the calls
    `floordiv mod max min non_negative`. Its own small parser, not Python's: dimension names
    may be Python keywords (`as`, `if`, `in`), which JAX accepts.

    Example:
        >>> evaluate("2*as + floordiv(in, 2)", {"as": 3, "in": 5}, ops=_PyOps)
        8
    """
    tokens = _tokens(expr)
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else ("end", None)

    def take(kind=None, value=None):
        nonlocal pos
        token = peek()
        if (kind and token[0] != kind) or (value is not None and token[1] != value):
            raise _NonLinear()
        pos += 1
        return token

    def binary(op, a, b):
        if isinstance(a, _Linear) or isinstance(b, _Linear):
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            raise _NonLinear()
        if op in ("^", "**"):
            return a ** b
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "//": lambda: ops.floordiv(a, b), "%": lambda: ops.mod(a, b)}[op]()

    def sum_():  # sum := product (('+' | '-') product)*
        value = product()
        while peek() in (("op", "+"), ("op", "-")):
            value = binary(take()[1], value, product())
        return value

    def product():  # product := unary (('*' | '//' | '%') unary)*
        value = unary()
        while peek() in (("op", "*"), ("op", "//"), ("op", "%")):
            value = binary(take()[1], value, unary())
        return value

    def unary():  # unary := '-' unary | power
        if peek() == ("op", "-"):
            take()
            return -unary()
        return power()

    def power():  # power := atom (('^' | '**') unary)?
        value = atom()
        if peek() in (("op", "^"), ("op", "**")):
            value = binary(take()[1], value, unary())
        return value

    def atom():
        kind, value = take()
        if kind == "int":
            return value
        if kind == "op" and value == "(":
            inner = sum_()
            take("op", ")")
            return inner
        if kind != "name":
            raise _NonLinear()
        if peek() == ("op", "("):
            take()
            values = [sum_()]
            while peek() == ("op", ","):
                take()
                values.append(sum_())
            take("op", ")")
            if not hasattr(ops, value) or value.startswith("_"):
                raise _NonLinear()
            if any(isinstance(v, _Linear) for v in values):
                raise _NonLinear()
            return getattr(ops, value)(*values)
        if value in env:
            return env[value]
        if unknown is not None:
            return unknown(value)
        raise _Unknown(value)

    result = sum_()
    if pos != len(tokens):
        raise _NonLinear()
    return result


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
    if _is_tensor(ok):
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
    """
    asserts: list | None = [] if graph_asserts else None
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
    dims = _symbolic_dims(specs, actual_shapes)
    if not graph_asserts:  # only what is known now: no op for run-time sizes
        dims = [dim for dim in dims if dim.actual is not None and not _is_tensor(dim.actual)]
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
            remainder = tf.math.floormod(rest, k) if _is_tensor(rest) else rest % k
            _check(tf.equal(remainder, 0) if _is_tensor(rest) else remainder == 0,
                   f"{SPEC_MISMATCH} Division had remainder {_show(remainder)} when computing "
                   f"the value of '{var}': "
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
               f"{SPEC_MISMATCH} Expected value >= 1 for dimension variable '{var}': "
               f"dimension variable `{var}` must be >= 1, but {src.where} = "
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
            a, b = evaluate(lhs.strip(), env), evaluate(rhs.strip(), env)
        except (_Unknown, _NonLinear):
            continue
        if _is_tensor(a) or _is_tensor(b):
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
    return "(known at run time)" if _is_tensor(x) else str(x)


def _fmt(shape) -> str:
    dims = ["?" if d is None or _is_tensor(d) else str(d) for d in shape]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"
