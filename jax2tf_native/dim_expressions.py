"""JAX dimension expressions (`2*b`, `floordiv(n, 2) + 1`) evaluated with Python ints or TF
scalars, and read as linear terms in unknown variables.

`arg_shape_check` solves a call's dimension variables with it and checks its dimensions and
constraints: a dimension known while the call is built is an int, one known only at run time a
scalar TF tensor (`MixedOps` then builds TF ops). Its own small parser, not Python's: dimension
names may be Python keywords (`as`, `if`, `in`), which JAX accepts.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import tensorflow as tf


class Unknown(Exception):
    """An expression refers to a variable not solved yet."""


class NonLinear(Exception):
    """An expression is not linear in its unknown variables."""


@dataclasses.dataclass
class Linear:
    """coefficient * variable + constant, with the constant possibly a TF tensor."""
    coeffs: dict
    const: Any

    def _lift(self, other):
        return other if isinstance(other, Linear) else Linear({}, other)

    def __add__(self, other):
        other = self._lift(other)
        coeffs = dict(self.coeffs)
        for v, k in other.coeffs.items():
            coeffs[v] = coeffs.get(v, 0) + k
        return Linear(coeffs, self.const + other.const)

    __radd__ = __add__

    def __neg__(self):
        return Linear({v: -k for v, k in self.coeffs.items()}, -self.const)

    def __sub__(self, other):
        return self + (-self._lift(other))

    def __rsub__(self, other):
        return self._lift(other) - self

    def __mul__(self, other):
        other = self._lift(other)
        if self.coeffs and other.coeffs:
            raise NonLinear()
        if other.coeffs:
            return other * self.const
        if not isinstance(other.const, int):
            raise NonLinear()
        return Linear({v: k * other.const for v, k in self.coeffs.items()},
                       self.const * other.const)

    __rmul__ = __mul__


class PyOps:
    floordiv = staticmethod(lambda a, b: a // b)
    mod = staticmethod(lambda a, b: a % b)
    max = staticmethod(max)
    min = staticmethod(min)
    non_negative = staticmethod(lambda a: max(a, 0))


def is_tensor(x) -> bool:
    return isinstance(x, tf.Tensor)


def _tf_or_py(tf_fn, py_fn):
    return lambda *xs: tf_fn(*xs) if any(is_tensor(x) for x in xs) else py_fn(*xs)


class MixedOps:
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
            raise NonLinear()  # not an expression we know: the module checks it
        number, name, op = m.groups()
        tokens.append(("int", int(number)) if number is not None else
                      ("name", name) if name is not None else ("op", op))
        pos = m.end()
    return tokens


def evaluate(expr: str, env: dict, ops=MixedOps, unknown: Callable[[str], Any] | None = None):
    """Evaluates a JAX dimension expression string (as `str(dim)` prints it, or a constraint
    side): integers, names, `+ - * // % ^ **`, unary minus, parentheses and the calls
    `floordiv mod max min non_negative`. Its own small parser, not Python's: dimension names
    may be Python keywords (`as`, `if`, `in`), which JAX accepts.

    Example:
        >>> evaluate("2*as + floordiv(in, 2)", {"as": 3, "in": 5}, ops=PyOps)
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
            raise NonLinear()
        pos += 1
        return token

    def binary(op, a, b):
        if isinstance(a, Linear) or isinstance(b, Linear):
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            raise NonLinear()
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
            raise NonLinear()
        if peek() == ("op", "("):
            take()
            values = [sum_()]
            while peek() == ("op", ","):
                take()
                values.append(sum_())
            take("op", ")")
            if not hasattr(ops, value) or value.startswith("_"):
                raise NonLinear()
            if any(isinstance(v, Linear) for v in values):
                raise NonLinear()
            return getattr(ops, value)(*values)
        if value in env:
            return env[value]
        if unknown is not None:
            return unknown(value)
        raise Unknown(value)

    result = sum_()
    if pos != len(tokens):
        raise NonLinear()
    return result
