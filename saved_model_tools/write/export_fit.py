"""Does a command-line export's `--input`s and `--params` fit the function? (writing side: JAX)

`jax2tf-native export` calls `check_fits` once the function is imported and before TensorFlow
is: one abstract trace (`jax.eval_shape`, symbolic dimensions as `--input` names them) finds
what a full export would only report as JAX's raw `TypeError: dot_general requires contracting
dimensions...` or a bare `KeyError: 'w'`. A failure becomes `cli.export.CommandError`
naming the input or parameter, expected against got, and the fix; nothing is written.

- A missing parameter: the parameter dicts are traced as `_ParamDict`s (a registered pytree
  node) whose `__missing__` knows the path read (`params['dense1']['w']`), so the message says
  which key the function wanted, what the file holds there, and the nearest key.
- A dimension that does not fit: the trace is retried with one `--input` dimension changed to
  a size the error names (`got (4,) and (3,)`: 3 for the 4); the change that makes it trace is
  the fix (`--input x:float32[b,3]`). Without one, the message names the inputs, the user's
  line and JAX's error.
"""
from __future__ import annotations

import difflib
import itertools
import os
import re
import traceback
from typing import Any, Callable, Sequence

import jax
import numpy as np

from saved_model_tools.cli.export import CommandError, format_input

Input = tuple[str, str, list[str]]   # (name, dtype, dims) as cli.export.parse_input gives
_MAX_PROBES = 20
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                      for m in (jax, np))
_PRODUCT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _MissingParameter(KeyError):
    """The traced function read a key the parameters do not have."""

    def __init__(self, path: tuple[str, ...], key: Any, present: list[str]):
        super().__init__(key)
        self.path, self.key, self.present = path, key, present


class _ParamDict(dict):
    """A parameter dict that knows its path; a missing key raises `_MissingParameter`."""
    path: tuple[str, ...] = ()

    def __missing__(self, key):
        raise _MissingParameter(self.path, key, sorted(map(str, self)))


def _flatten(node: _ParamDict):
    keys = sorted(node)
    return [node[k] for k in keys], (node.path, tuple(keys))


def _unflatten(aux, children) -> _ParamDict:
    path, keys = aux
    node = _ParamDict(zip(keys, children))
    node.path = path
    return node


jax.tree_util.register_pytree_node(_ParamDict, _flatten, _unflatten)


def _recording(tree: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(tree, dict):
        return jax.ShapeDtypeStruct(np.shape(tree), np.asarray(tree).dtype)
    node = _ParamDict({k: _recording(v, path + (str(k),)) for k, v in tree.items()})
    node.path = path
    return node


def check_fits(function: Callable, function_name: str, params: Any, params_file: str | None,
               inputs: Sequence[Input]) -> None:
    """Traces `function(params, *inputs)` abstractly; raises `CommandError` when they do not fit.

    Args:
      function: the imported MODULE:FUNCTION.
      function_name: "MODULE:FUNCTION" as the user wrote it, for messages.
      params: the parameters `load_params` read ({} without --params).
      params_file: the --params path, or None.
      inputs: the parsed --input specs.

    Raises:
      CommandError: a parameter the function reads is missing, or an input's shape does not
        fit; the message names it, expected against got, and the fix. Errors this check cannot
        attribute are left to the export, which reports them as before.

    Example:
        >>> import numpy as np
        >>> from saved_model_tools.cli.export import CommandError
        >>> params = {"dense": {"w": np.ones((3, 2), np.float32)}}
        >>> try:
        ...     check_fits(lambda p, x: x @ p["dense"]["w"], "m:f", params, "p.npz",
        ...                [("x", "float32", ["b", "4"])])
        ... except CommandError as e:
        ...     print(str(e).split(" (")[0], "...", str(e).split(" Fix: ")[1])
        --input x:float32[b,4] does not fit m:f: dimension 1 of x is 4 where the function
        needs 3 ... --input x:float32[b,3].
    """
    error = _trace_error(function, params, inputs)
    if error is None:
        return
    if isinstance(error, _MissingParameter):
        raise CommandError(_missing_parameter_message(error, function_name, params,
                                                      params_file)) from None
    if not isinstance(error, (TypeError, ValueError)):
        return
    where = _user_line(error)
    reason = " ".join(str(error).split()).rstrip(".")
    fix = _probe_dimension(function, params, inputs, str(error))
    if fix is not None:
        index, dim, got, wanted = fix
        name, dtype, dims = inputs[index]
        fixed = list(dims)
        fixed[dim] = wanted
        raise CommandError(
            f"--input {format_input(name, dtype, dims)} does not fit {function_name}: dimension "
            f"{dim} of {name} is {got} where the function needs {wanted} ({where}{reason}). "
            f"Fix: --input {format_input(name, dtype, fixed)}.") from None
    given = ", ".join(format_input(*spec) for spec in inputs)
    shapes = "; ".join(f"{key} {value.dtype}{list(value.shape)}"
                       for key, value in _flat_params(params)[:8])
    if "positional argument" in reason:
        fix = (f"give one --input per argument of {function_name} after params, in order "
               f"({len(inputs)} given)")
    else:
        fix = ("give each --input the dtype and shape the function expects (integers where it "
               "needs fixed sizes, names for dimensions that vary)")
    raise CommandError(
        f"{function_name} cannot be called with --input {given}"
        f"{f' and --params {params_file} ({shapes})' if params_file else ''}: {where}{reason}. "
        f"Fix: {fix}.") from None


def _specs(inputs: Sequence[Input], overrides: dict | None = None) -> list:
    scope = jax.export.SymbolicScope()
    specs = []
    for index, (name, dtype, dims) in enumerate(inputs):
        dims = [str((overrides or {}).get((index, i), d)) for i, d in enumerate(dims)]
        try:
            shape = jax.export.symbolic_shape(",".join(dims), scope=scope) if dims else ()
        except ValueError as e:
            raise CommandError(
                f"--input {format_input(name, dtype, dims)}: {' '.join(str(e).split())} Fix: "
                f"each dimension is an integer, a name (b) or an expression of names "
                f"(2*b).") from None
        specs.append(jax.ShapeDtypeStruct(shape, jax.numpy.dtype(dtype)))
    return specs


def _trace_error(function, params, inputs, overrides=None, *, record=True) -> Exception | None:
    """What tracing `function` raises, or None. With `record`, the parameter dicts are first
    `_ParamDict`s (to name a missing key); an error they do not explain is confirmed with
    the parameters as read, so a function that minds the dict's type is not blamed."""
    specs = _specs(inputs, overrides)
    if record:
        try:
            jax.eval_shape(function, _recording(params), *specs)
            return None
        except _MissingParameter as e:
            return e
        except Exception:  # confirmed below with the plain parameters
            pass
    try:
        jax.eval_shape(function, params, *specs)
    except Exception as e:  # what the user's function raises, attributed by the caller
        return e
    return None


def _probe_dimension(function, params, inputs, message: str):
    """(input index, dim, size given, size that traces) for the one change that fixes it."""
    sizes = sorted({int(n) for n in _NUMBER.findall(message)})
    candidates = [(index, dim, given, size)
                  for index, (_, _, dims) in enumerate(inputs)
                  for dim, given in enumerate(dims)
                  for size in sizes if str(size) != given and size > 0]
    for index, dim, given, size in itertools.islice(candidates, _MAX_PROBES):
        if _trace_error(function, params, inputs, {(index, dim): size},
                        record=False) is None:
            return index, dim, given, str(size)
    return None


def _missing_parameter_message(error: _MissingParameter, function_name, params,
                               params_file) -> str:
    read = "params" + "".join(f"[{k!r}]" for k in (*error.path, error.key))
    if not params_file:
        return (f"{function_name} reads {read}, and no --params was given. Fix: pass --params "
                f"FILE.npz with the parameters (keys nest with '/': "
                f"{'/'.join((*error.path, str(error.key)))!r} for {read}), or a Flax .msgpack "
                f"file.")
    wanted = "/".join((*error.path, str(error.key)))
    keys = [key for key, _ in _flat_params(params)]
    by_lower = {key.lower(): key for key in reversed(keys)}
    close = difflib.get_close_matches(wanted.lower(), list(by_lower), n=1, cutoff=0.6)
    under = "/".join(error.path) or "the top level"
    spelled = f" (the file has {by_lower[close[0]]!r})" if close else ""
    return (f"{function_name} reads {read}, which --params {params_file} does not have: under "
            f"{under} it has {error.present}. Fix: store that parameter under the key "
            f"{wanted!r} in the file{spelled}, or read the name the file uses in the function.")


def _flat_params(params, prefix: str = "") -> list[tuple[str, np.ndarray]]:
    if not isinstance(params, dict):
        return [(prefix or "params", np.asarray(params))]
    flat = []
    for key in sorted(params, key=str):
        flat.extend(_flat_params(params[key], f"{prefix}/{key}" if prefix else str(key)))
    return flat


def _user_line(error: Exception) -> str:
    """"file.py:5: `source line`: " for the innermost frame of the user's code, or ""."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        path = os.path.abspath(frame.filename)
        if (frame.filename.startswith("<") or path.startswith(_LIBRARY_DIRS)
                or path.startswith(_PRODUCT_ROOT + "saved_model_tools")
                or "site-packages" in path):
            continue
        code = f" `{frame.line.strip()}`" if frame.line else ""
        return f"{os.path.basename(frame.filename)}:{frame.lineno}{code}: "
    return ""
