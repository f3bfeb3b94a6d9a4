"""A generated program: its inputs (values and which dimensions are symbolic), its steps (one
line of JAX each), its outputs with the contract's bound for each, and the Python source it
runs as, which is also the reproducer printed for a mismatch."""
from __future__ import annotations

import dataclasses
import functools
import string

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from tools.lax_fuzz import values as values_lib


@dataclasses.dataclass
class Step:
    """`target = template.format(*operands)`; `op` names the catalog entry (for reports and
    the known classes); `mag` is the line computing the target's magnitude companion (the
    scale of a tolerated reassociation), evaluated by `jax.jit` only."""
    target: str
    template: str
    operands: tuple[str, ...]
    op: str
    mag: str | None = None
    families: tuple[str, ...] = ()  # of the target value (see `Output`)
    dtype: str = ""
    shape: tuple = ()

    def as_output(self) -> Output:
        return Output(self.target, self.families, self.target if self.mag else None,
                      self.dtype, self.shape)

    @property
    def expr(self) -> str:
        return self.template.format(*self.operands)


@dataclasses.dataclass
class Output:
    """A result: the value's name, the tolerated families it went through (empty: bit-exact),
    and the name of its magnitude companion (None: the expected value's own magnitude)."""
    name: str
    families: tuple[str, ...] = ()
    mag: str | None = None
    dtype: str = ""
    shape: tuple = ()

    @property
    def differentiable(self) -> bool:
        return self.dtype in ("float32", "float64")


@dataclasses.dataclass
class Program:
    """One generated program (see the module docstring).

    Attributes:
      inputs: name -> value (numpy array).
      symbolic: name -> per dimension, whether it is symbolic (polymorphic_shapes).
      steps: the lines, in order.
      outputs: the results.
      x64: whether it needs `jax_enable_x64` (64-bit dtypes).
      jvp, grad: whether its jvp and TF gradients are checked (real float32/64 inputs and
        outputs, every op differentiable).
      tangents, cts, cts2: see `set_derivative_inputs`.
    """
    inputs: dict[str, np.ndarray]
    symbolic: dict[str, tuple[bool, ...]]
    steps: list[Step]
    outputs: list[Output]
    x64: bool = False
    jvp: bool = False
    grad: bool = False
    # Inputs that are a layer's weights: their dimensions stay static when the program is
    # made symbolic, as a model's parameters are (only its batch is polymorphic).
    parameters: frozenset = frozenset()
    # Set by the runner before a run: one tangent per float input (jvp), one cotangent per
    # differentiable output (first order) and per float input (second order).
    tangents: list = dataclasses.field(default_factory=list)
    cts: list = dataclasses.field(default_factory=list)
    cts2: list = dataclasses.field(default_factory=list)

    @property
    def ops(self) -> list[str]:
        return [s.op for s in self.steps]

    def source(self, name: str = "f", mags: bool = False) -> str:
        """The function as Python source; with `mags`, the one returning the companions."""
        lines = [f"def {name}({', '.join(self.inputs)}):"]
        for step in self.steps:
            lines.append(f"    {step.target} = {step.expr}")
            if mags and step.mag:
                lines.append(f"    m_{step.target} = {step.mag}")
        if mags:
            results = [f"m_{o.mag}" if o.mag else "None" for o in self.outputs]
        else:
            results = [o.name for o in self.outputs]
        lines.append(f"    return ({', '.join(results)},)")
        return "\n".join(lines) + "\n"

    def function(self, mags: bool = False):
        return compile_source(self.source(mags=mags))

    def polymorphic_shapes(self, prefix: str = "") -> list[str | None]:
        """One shape string per input: the symbolic dimensions of one size share a symbol."""
        names: dict[int, str] = {}
        specs = []
        for key, value in self.inputs.items():
            flags = self.symbolic.get(key, ())
            if not any(flags):
                specs.append(None)
                continue
            dims = []
            for size, symbolic in zip(value.shape, flags):
                if symbolic:
                    names.setdefault(size, string.ascii_lowercase[len(names)])
                    dims.append(prefix + names[size])
                else:
                    dims.append(str(size))
            specs.append("(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")")
        return specs

    @property
    def polymorphic(self) -> bool:
        return any(any(f) for f in self.symbolic.values())

    def float_inputs(self) -> list[str]:
        return [k for k, v in self.inputs.items() if v.dtype in (np.float32, np.float64)]

    def set_derivative_inputs(self, rng: np.random.Generator) -> None:
        """Draws the tangents (one per float input) and cotangents (one per differentiable
        output, and one per float input for second order) the derivative checks use."""
        if not self.jvp:
            return
        draw = values_lib.tangent
        self.tangents = [draw(rng, self.inputs[k].shape, self.inputs[k].dtype.name)
                         for k in self.float_inputs()]
        self.cts = [draw(rng, o.shape, o.dtype) for o in self.outputs if o.differentiable]
        self.cts2 = [draw(rng, self.inputs[k].shape, self.inputs[k].dtype.name)
                     for k in self.float_inputs()]

    def float_function(self):
        """The program as a function of its float32/64 inputs (the others fixed at their
        values) returning its float32/64 outputs: what jvp and gradients are taken of."""
        fn = self.function()
        names = list(self.inputs)
        floats = self.float_inputs()
        fixed = {k: v for k, v in self.inputs.items() if k not in floats}
        keep = [i for i, o in enumerate(self.outputs) if o.differentiable]

        def restricted(*xs):
            by_name = dict(zip(floats, xs), **fixed)
            outs = fn(*[by_name[n] for n in names])
            return tuple(outs[i] for i in keep)
        return restricted


def wide(x):
    """A value's magnitude in the widest float type enabled (companions are computed there)."""
    kind = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    return jnp.abs(x).astype(kind)


def complex_array(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """A complex array from its parts, part by part (keeps ±inf, NaN and -0.0 parts)."""
    z = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    z.real, z.imag = real, imag
    return z


NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "wide": wide,
             "complex_array": complex_array, "inf": np.inf, "nan": np.nan}


@functools.lru_cache(maxsize=4096)
def compile_source(source: str):
    scope = dict(NAMESPACE)
    exec(compile(source, "<lax_fuzz program>", "exec"), scope)  # noqa: S102 (our own text)
    return next(v for k, v in scope.items() if k not in NAMESPACE and callable(v))


def array_source(value: np.ndarray) -> str:
    """A numpy array as source text that rebuilds it exactly (NaN, ±inf, -0.0 kept)."""
    name = "jnp.bfloat16" if value.dtype == ml_dtypes.bfloat16 else f"np.{value.dtype.name}"
    if values_lib.is_complex(value.dtype.name):
        return f"complex_array({array_source(value.real)}, {array_source(value.imag)})"
    def item(x):
        if value.dtype.kind in "biu":
            return repr(bool(x)) if value.dtype.kind == "b" else str(int(x))
        x = float(x)
        if np.isnan(x):
            return "nan"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        if x == 0:
            return "-0.0" if np.signbit(x) else "0.0"
        exact = value.dtype.type(x)
        return str(exact) if value.dtype.kind == "f" else repr(x)  # shortest that round-trips
    def nest(a):
        if a.ndim == 0:
            return item(a)
        return "[" + ", ".join(nest(a[i]) for i in range(a.shape[0])) + "]"
    if value.size == 0:
        return f"np.zeros({value.shape}, {name})"
    return f"np.array({nest(value)}, {name})"
