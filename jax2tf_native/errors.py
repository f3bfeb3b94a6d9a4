"""Exceptions raised for bad inputs. Each message names the argument path, what was expected,
what came, and the fix.

Drop-in rule (docs/compat.md, "Exceptions"): where `jax.experimental.jax2tf` raises in the same
situation, our class is also an instance of the class it raises (ValueError, TypeError,
`tf.errors.InvalidArgumentError`, `tf.errors.NotFoundError`) and the message starts with, or
contains, its key phrase, so `except` clauses and message checks written for the peer still
match; ours then adds the argument path, expected vs got, and the fix.
"""
from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf


class _TfErrorMixin:
    """Lets one of our errors also be a `tf.errors.OpError` subclass (what the peer raises from
    the XlaCallModule op): TF's classes take (node_def, op, message), ours the message alone.
    `str(error)` and `error.message` are the message; it pickles as (message,)."""

    def __init__(self, message: str = ""):
        # OpError.__init__ resets `args` through BaseException.__init__(); set them after.
        tf_base = next(c for c in type(self).__mro__ if issubclass(c, tf.errors.OpError)
                       and c.__module__.startswith("tensorflow"))
        tf_base.__init__(self, None, None, message)
        self.args = (message,)

    def __reduce__(self):
        return type(self), (self.message,)


class PolymorphicShapeError(ValueError):
    """`polymorphic_shapes` is malformed, or does not fit the arguments' pytree or shapes."""


class ArgumentShapeError(_TfErrorMixin, ValueError, tf.errors.InvalidArgumentError):
    """An argument's rank or dimension does not agree with the exported specification.

    Also a `tf.errors.InvalidArgumentError`: for a call whose shapes break the polymorphic
    specification (e.g. `b = 0`) jax2tf raises that from the module's shape assertions, with
    JAX's phrase ("Input shapes do not match the polymorphic shapes specification. ...")."""


class ArgumentTypeError(TypeError):
    """An argument is not an array (e.g. None, a string), or its dtype does not agree."""


class GradientSpecError(ValueError):
    """`gradient_argnums` / `gradient_outputs` name an argument or result the function lacks."""


class JaxTransformationError(ValueError, TypeError):
    """A converted (TF) function was called inside a JAX transformation: under `jax.jit`,
    `jax.vmap`, `jax.grad` or inside a function being converted, with JAX tracers or no
    arguments at all. It takes TF values, not JAX ones. A ValueError, as jax2tf's ("convert
    must be used outside all JAX transformations"); also a TypeError, as it was before."""

    PEER_PHRASE = "convert must be used outside all JAX transformations"


class CallTfShapeError(PolymorphicShapeError):
    """A `call_tf` under polymorphic shapes has a result whose shape TF cannot infer from the
    argument shapes (jax2tf_native.call_tf_result_shapes), or sits where the call cannot be split."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, for one-line error texts ('' when empty)."""
    return (str(error).strip().splitlines() or [""])[0]


class ExportedModuleError(ValueError):
    """An exported module (or its serialized bytes) cannot be run by the installed TensorFlow."""


class ModuleNotRunnableHereError(_TfErrorMixin, ExportedModuleError, tf.errors.NotFoundError):
    """A module converts and saves, but this host cannot run it: it was exported for platforms
    TF here lacks (e.g. only "tpu" on a CPU machine), or for N devices with shard_map or
    collectives. Raised when the op would run (eagerly at the call; in a graph, by a guard op
    whose message is the same). Also a `tf.errors.NotFoundError`, as the XlaCallModule op's
    "The current platform CPU is not among the platforms required by the module" that jax2tf
    raises eagerly."""


class NonPortableLinalgError(ValueError):
    """A linear-algebra operation cannot be lowered to TF-runnable StableHLO.

    Raised at export by `jax2tf_native.linalg`, the portable lowering, for what it does not
    cover.

    Attributes:
        primitive: name of the JAX primitive (e.g. ``"eig"``), or ``None`` when the
            problem was found by :func:`jax2tf_native.linalg.check_module_portable`.
        platforms: the export platforms.
        reason: why no portable lowering exists.
    """

    def __init__(self, primitive: str | None, platforms: Sequence[str],
                 reason: str, fix: str):
        self.primitive = primitive
        self.platforms = tuple(platforms)
        self.reason = reason
        where = ", ".join(self.platforms) or "?"
        if primitive:
            head = (f"jax.lax.linalg primitive '{primitive}' cannot be exported for "
                    f"TensorFlow with linalg='portable' on platform(s) {where}")
        else:
            head = (f"the exported module (platform(s) {where}) cannot run in "
                    "TensorFlow")
        super().__init__(f"{head}: {reason}. {fix}")


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
