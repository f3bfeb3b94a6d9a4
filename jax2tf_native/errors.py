"""Exceptions raised for bad inputs. Each message names the argument path, what was expected,
what came, and the fix. They subclass ValueError/TypeError so generic handlers still work."""
from __future__ import annotations


class PolymorphicShapeError(ValueError):
    """`polymorphic_shapes` is malformed, or does not fit the arguments' pytree or shapes."""


class ArgumentShapeError(ValueError):
    """An argument's rank or dimension does not agree with the exported specification."""


class ArgumentTypeError(TypeError):
    """An argument is not an array (e.g. None, a string), or its dtype does not agree."""


class GradientSpecError(ValueError):
    """`gradient_argnums` / `gradient_outputs` name an argument or result the function lacks."""


class JaxTransformationError(TypeError):
    """A converted (TF) function was called with JAX tracers: under `jax.jit`, `jax.vmap`,
    `jax.grad` or inside a function being converted. It takes TF values, not JAX ones."""


class CallTfShapeError(PolymorphicShapeError):
    """A `call_tf` under polymorphic shapes has a result whose shape TF cannot infer from the
    argument shapes (jax2tf_native.call_tf_shapes), or sits where the call cannot be split."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, for one-line error texts ('' when empty)."""
    return (str(error).strip().splitlines() or [""])[0]


class ExportedModuleError(ValueError):
    """An exported module (or its serialized bytes) cannot be run by the installed TensorFlow."""


class ModuleNotRunnableHereError(ExportedModuleError):
    """A module converts and saves, but this host cannot run it: it was exported for platforms
    TF here lacks (e.g. only "tpu" on a CPU machine), or for N devices with shard_map or
    collectives. Raised when the op would run (eagerly at the call; in a graph, by a guard op
    whose message is the same)."""


class SymbolicCallTfFound(Exception):
    """Internal signal, never reaches the user: raised inside an export's trace at a `call_tf`
    with symbolic shapes, so that `convert` splits the function there (`call_tf_split`). Not a
    ValueError, so that no fallback meant for export failures takes it."""


# Raised when an exported module holds a custom call TF cannot run; defined with the allowlist.
from tf_ops.custom_call_check import CustomCallNotAllowedError  # noqa: E402,F401
# Raised when a module cannot be written for, or run by, the requested `target_tf`.
from tf_ops.tf_targets import TargetTfError  # noqa: E402,F401
# Raised (enable_xla=False) for an op with no exact plain-TF lowering; a NotImplementedError.
from tf_ops.plain.errors import PlainLoweringError  # noqa: E402,F401

# Raised at export for linear algebra the portable lowering does not cover; defined with it.
from jax2tf_native.linalg_portable import NonPortableLinalgError  # noqa: E402,F401
