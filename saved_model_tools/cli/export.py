"""`jax2tf-native export MODULE:FUNCTION --params FILE --input NAME:DTYPE[DIMS] ... --out DIR`.

Exports a user's JAX function `FUNCTION(params, *inputs)` with parameters from a file as a
SavedModel (`saved_model_tools.save`), then runs `verify` on it.

The command's cheap checks come first, in the order of their cost: every `--input` (dtype
included) is parsed, then the `--params` file is read (numpy), then MODULE:FUNCTION is imported
(which imports JAX when the module does); `write.export_fit.check_fits` then traces the function
abstractly to name an input or parameter that does not fit; only then is TensorFlow imported
(in `run`). JAX is reached through the package's lazy attributes (`saved_model_tools.save`,
`.write`, `.verify`): this module is on the reading side.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.resources
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

import saved_model_tools
from saved_model_tools.cli.failures import fail
from tf_ops import platforms as tf_platforms   # imports neither JAX nor TF

_INPUT_RE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*):(?P<dtype>[A-Za-z0-9_]+)"
                       r"\[(?P<dims>[^\[\]]*)\]$")
# Symbolic dimensions get this size in the example inputs the references are recorded at.
EXAMPLE_SYMBOLIC_SIZE = 2

# The dtypes an --input may name, with the other spellings JAX accepts or prints for each:
# `float`/`int`/`uint`/`complex` mean what they mean in JAX without x64 (jnp.zeros(2, float)
# is float32), never NumPy's float64/int64; f32, i32, bf16, ... are JAX's printed names.
DTYPES = {
    "float32": ("float", "f32"), "float16": ("f16", "half"), "bfloat16": ("bf16",),
    "float64": ("f64", "double"),
    "int8": ("i8",), "int16": ("i16",), "int32": ("int", "i32"), "int64": ("i64",),
    "uint8": ("u8",), "uint16": ("u16",), "uint32": ("uint", "u32"), "uint64": ("u64",),
    "bool": ("bool_",), "complex64": ("complex", "c64"), "complex128": ("c128",),
}
_DTYPE_NAMES = {alias: name for name, aliases in DTYPES.items() for alias in (name, *aliases)}


def dtype_help() -> str:
    """The accepted dtypes for `--help`: "float32 (float, f32), float16 (f16, half), ..."."""
    return ", ".join(f"{name} ({', '.join(aliases)})" for name, aliases in DTYPES.items())


class CommandError(Exception):
    """A bad command-line input; the message says what and how to fix it."""


def parse_input(text: str) -> tuple[str, str, list[str]]:
    """"images:float32[b,28,28,1]" -> ("images", "float32", ["b", "28", "28", "1"]).

    The dtype comes back as its full name: "x:float[b,3]" -> ("x", "float32", ["b", "3"]).
    """
    match = _INPUT_RE.match(text.replace(" ", ""))
    if not match:
        raise CommandError(f"--input {text!r} is not NAME:DTYPE[DIMS]. Fix: e.g. "
                           f"--input images:float32[b,28,28,1] (dims: integers or dimension "
                           f"variables; [] for a scalar).")
    dims = [d for d in match["dims"].split(",") if d] if match["dims"] else []
    dtype = _DTYPE_NAMES.get(match["dtype"].lower())
    if dtype is None:
        close = difflib.get_close_matches(match["dtype"].lower(), list(_DTYPE_NAMES), n=1)
        suggestion = (f"--input {format_input(match['name'], _DTYPE_NAMES[close[0]], dims)}"
                      if close else f"one of {', '.join(DTYPES)}")
        raise CommandError(
            f"--input {text!r}: unknown dtype {match['dtype']!r}. Fix: {suggestion} (dtypes: "
            f"{dtype_help()}).")
    return match["name"], dtype, dims


def format_input(name: str, dtype: str, dims) -> str:
    """The --input spelling of one input: ("x", "float32", ["b", "3"]) -> "x:float32[b,3]"."""
    return f"{name}:{dtype}[{','.join(map(str, dims))}]"


def check_platforms(text: str | None) -> list[str] | None:
    """--platforms "cpu,cuda" -> ["cpu", "cuda"]; unknown names are a CommandError."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",")]
    try:
        return list(tf_platforms.canonical_platforms(names))
    except ValueError:
        unknown = [n for n in names if n.lower() not in (*tf_platforms.JAX_PLATFORMS, "gpu")]
        raise CommandError(
            f"--platforms {text}: unknown platform(s) {unknown or names}. Fix: a comma-separated "
            f"subset of {', '.join(tf_platforms.JAX_PLATFORMS)} (gpu means cuda), e.g. "
            f"--platforms cpu,cuda.") from None


def check_target_tf(text: str | None) -> None:
    """--target-tf must be a TF version of the measured table (tf_ops/data/tf_targets.json,
    read as data: tf_ops.tf_targets itself imports TensorFlow, which this check comes before)."""
    if text is None:
        return
    table = importlib.resources.files("tf_ops").joinpath("data", "tf_targets.json")
    measured = sorted(json.loads(table.read_text())["targets"],
                      key=lambda v: tuple(map(int, v.split("."))))
    match = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?$", text.strip())
    if not match or f"{match[1]}.{match[2]}" not in measured:
        raise CommandError(
            f"--target-tf {text}: not a TensorFlow version we measured; supported: "
            f"{', '.join(measured)}. Fix: the serving TF's major.minor version, e.g. "
            f"--target-tf {measured[-2]}, or leave it out for the installed TF.")


def load_function(spec: str):
    """Imports "package.module:function" (the current directory is on the path)."""
    if ":" not in spec:
        raise CommandError(f"{spec!r} is not MODULE:FUNCTION. Fix: e.g. my_model:apply.")
    module_name, function_name = spec.split(":", 1)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise CommandError(f"cannot import module {module_name!r}: {e}. Fix: run from the "
                           f"directory that contains it, or install it.") from None
    target = module
    for part in function_name.split("."):
        if not hasattr(target, part):
            raise CommandError(f"module {module_name!r} has no {function_name!r}. Fix: name a "
                               f"function defined there as {module_name}:<name>.")
        target = getattr(target, part)
    if not callable(target):
        raise CommandError(f"{spec} is a {type(target).__name__}, not a function.")
    return target


def load_params(path: str):
    """Parameters from .npz (keys "a/b" become nested dicts) or a Flax .msgpack file."""
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"--params {path}: no such file.")
    if file.suffix == ".msgpack":
        try:
            from flax import serialization  # optional dependency, needed for .msgpack only
        except ImportError:
            raise CommandError("--params .msgpack needs Flax (pip install flax), or save the "
                               "parameters with numpy.savez instead.") from None
        return serialization.msgpack_restore(file.read_bytes())
    try:
        with np.load(file, allow_pickle=False) as data:
            flat = {k: data[k] for k in data.files}
    except Exception as e:
        raise CommandError(f"--params {path} is not a readable .npz file ({e}). Fix: write it "
                           f"with numpy.savez(path, **{{'dense/w': w, ...}}).") from None
    params: dict = {}
    for key, value in flat.items():
        node = params
        *parents, leaf = key.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return params


def run(args: argparse.Namespace, out=print) -> int:
    start = time.perf_counter()
    # Cheapest first: a typo in --input or --params fails in well under a second.
    inputs = [parse_input(text) for text in args.input]
    if not inputs:
        raise CommandError("give at least one --input NAME:DTYPE[DIMS].")
    platforms = check_platforms(args.platforms)
    check_target_tf(args.target_tf)
    params = load_params(args.params) if args.params else {}
    function = load_function(args.function)
    saved_model_tools.write.export_fit.check_fits(function, args.function, params,
                                                  args.params, inputs)
    import tensorflow as tf  # after the checks above: a bad command fails before TF loads
    references = saved_model_tools.write.references
    examples, specs = [], []
    for index, (name, dtype, dims) in enumerate(inputs):
        shape = [int(d) if d.isdigit() else EXAMPLE_SYMBOLIC_SIZE for d in dims]
        examples.append(references.random_inputs([tf.TensorSpec(shape, tf.as_dtype(dtype))],
                                                 batch=shape[0] if shape else 1, seed=index)[0])
        specs.append("(" + ", ".join(dims) + ")" if any(not d.isdigit() for d in dims) else None)
    out(f"loaded {args.function} and {len(params) if isinstance(params, dict) else 1} params "
        f"entries in {time.perf_counter() - start:.2f} s")
    saved_model_tools.save(args.out, function, params, examples, polymorphic_shapes=specs,
                           input_names=[name for name, _, _ in inputs],
                           with_gradient=not args.no_gradient,
                           platforms=platforms,
                           overwrite=args.overwrite, progress=out,
                           target_tf=args.target_tf, enable_xla=not args.no_xla)
    out(f"saved {args.out} in {time.perf_counter() - start:.2f} s")
    if args.no_verify:
        return 0
    verify_lib = saved_model_tools.verify
    verify_start = time.perf_counter()
    report = verify_lib.verify(args.out)
    failed = [c.line() for c in report.checks if not c.passed] + list(report.errors)
    out(f"verify without JAX: {report.status}, {len(report.checks)} checks "
        f"({time.perf_counter() - verify_start:.2f} s)")
    for line in failed:
        out(f"  {line}")
    if report.status == "not-runnable-here":
        # A model for platforms or devices this host lacks (--platforms tpu) is written as
        # asked: verify checked its loads and signatures, and cannot run it here.
        out(f"  {' '.join(report.not_runnable_here)} (loads and signatures checked; run "
            f"`jax2tf-native verify {args.out}` where it runs)")
    out(f"done in {time.perf_counter() - start:.2f} s")
    return 0 if report.ok or report.status == "not-runnable-here" else 1


def run_export(args: argparse.Namespace) -> int:
    try:
        return run(args)
    except CommandError as e:
        return fail(args, str(e), 2)
    except FileExistsError:
        return fail(
            args, f"{args.out} already exists. Fix: add --overwrite to replace it (the old "
                  f"model stays until the new one is complete), or choose a new --out "
                  f"directory.", 1)
    except (ValueError, TypeError, OSError) as e:
        return fail(args, f"{type(e).__name__}: {e}", 1)
    except NotImplementedError as e:  # PlainLoweringError (--no-xla): names op, dtype, line
        return fail(args, f"{type(e).__name__}: {e}", 1)
