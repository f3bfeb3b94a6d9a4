"""The one argument parser of the `jax2tf-native` command line (also `python -m saved_model_tools`):
every command, its options, their help and the handler that runs it.

Importing this imports argparse and the handlers' modules, which import neither TensorFlow nor
JAX: `--help` and a usage error print before either is loaded.
"""
from __future__ import annotations

import argparse
import textwrap

from saved_model_tools.cli import demo as demo_command
from saved_model_tools.cli import export, reading_commands
from saved_model_tools.cli.export import dtype_help

_EXPORT_DESCRIPTION = f"""\
Exports a JAX function FUNCTION(params, *inputs) from an importable module (the current
directory is on the path) with its parameters from a file, as a SavedModel; prints each phase
with its time, then verifies the model without JAX.

--input NAME:DTYPE[DIMS], one per input after params, e.g. images:float32[b,28,28,1]:
  DIMS    integers, or dimension names for sizes that vary (b); [] is a scalar
{textwrap.fill(dtype_help() + "; float is float32 and int is int32, as in JAX",
              width=92, initial_indent="  DTYPE   ", subsequent_indent=" " * 10)}

--no-xla writes ordinary TF ops instead of XlaCallModule ops, for TF builds without XLA and
for converters that read TF ops (TFLite, TF.js, tf2onnx).

Exit codes: 0 saved and verified; 1 the save or the verify run failed; 2 a bad command
(module, --input, --params, --platforms, --target-tf, or inputs and parameters that do not fit
the function), reported before anything is written.
"""


_TFJS_DESCRIPTION = """\
Writes a SavedModel saved with plain TF ops (export --no-xla) as a TF.js graph model
(model.json and weight shards); no JAX needed. For a JAX function, run
jax2tf-native export MODULE:FUNCTION ... --no-xla --out DIR first.

Exit codes: 0 written; 1 the output exists (without --overwrite); 2 an unreadable SavedModel
or unknown signature; 4 TF.js cannot run the model (each op or dtype named, with the line of
the JAX code it came from; nothing written).
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The `jax2tf-native` argument parser, with one subcommand per command."""
    parser = argparse.ArgumentParser(
        prog="jax2tf-native",
        description="Move JAX programs into TensorFlow through jax.export and XlaCallModule.")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failure (may follow any command)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = subparsers.add_parser(
        "demo", help="convert the built-in example model and compare JAX vs TF outputs")
    demo.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 7, 64],
                      help="batch sizes to run (default: 1 7 64)")
    demo.add_argument("--repeats", type=int, default=20, help="timed calls per batch size")
    demo.add_argument("--out", help="also train briefly, save a SavedModel here, verify it "
                                    "without JAX and report")
    demo.set_defaults(handler=demo_command.run_demo)
    _add_export(subparsers)
    _add_inspect(subparsers)
    _add_verify(subparsers)
    _add_tflite(subparsers)
    _add_tfjs(subparsers)
    return parser


def _add_export(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="export MODULE:FUNCTION(params, *inputs) as a SavedModel",
        description=_EXPORT_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", metavar="MODULE:FUNCTION",
                        help="the function to export, called as FUNCTION(params, *inputs)")
    parser.add_argument("--params", metavar="FILE",
                        help=".npz (keys 'a/b' nest as params['a']['b']) or Flax .msgpack file")
    parser.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE[DIMS]",
                        help="one per input, e.g. images:float32[b,28,28,1] (dtypes above)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the SavedModel directory to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model")
    parser.add_argument("--no-gradient", action="store_true", help="do not keep gradients")
    parser.add_argument("--platforms", help="comma-separated, e.g. cpu,cuda")
    parser.add_argument("--target-tf", metavar="VERSION", default=None,
                        help="the TF / TF Serving version that will serve the model, 2.17 ... "
                             "2.21 (default: the installed TF)")
    parser.add_argument("--no-xla", action="store_true",
                        help="write ordinary TF ops, no XlaCallModule (enable_xla=False): "
                             "serves where TF has no XLA; an op with no exact lowering fails "
                             "before anything is written")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip running the saved model without JAX against the references")
    parser.set_defaults(handler=export.run_export)


def _add_inspect(subparsers) -> None:
    """Adds `inspect DIR [--mlir] [--json]` (handler returns the exit code)."""
    parser = subparsers.add_parser(
        "inspect", help="show a SavedModel's signatures, XlaCallModule ops, variables and the "
                        "oldest TF that runs it (no JAX needed)",
        description="Show signatures (with polymorphic dims), each distinct XlaCallModule "
                    "(calling convention, platforms, size, custom calls, StableHLO version), "
                    "variables, warmup requests and the oldest TF that can run the model.")
    parser.add_argument("dir", help="the SavedModel directory")
    parser.add_argument("--mlir", action="store_true",
                        help="also print each module's StableHLO text")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=reading_commands.run_inspect)


def _add_verify(subparsers) -> None:
    """Adds `verify DIR [--batch-sizes N ...]` (handler returns the exit code)."""
    parser = subparsers.add_parser(
        "verify", help="run the model without JAX (tf.saved_model.load and TF Serving's "
                       "session path) and compare with the recorded JAX outputs",
        description="Loads the SavedModel in a child process where importing jax raises "
                    "ImportError, runs every signature through tf.saved_model.load and the TF1 "
                    "session path TF Serving uses, and compares with the recorded JAX outputs. "
                    "Exit 0 passed, 1 mismatch, 2 unreadable model, 3 no references, 5 not "
                    "runnable on this host (modules for other platforms or more devices).")
    parser.add_argument("dir", help="the SavedModel directory")
    parser.add_argument("--batch-sizes", type=_positive_int, nargs="+", default=None,
                        metavar="N", help="batch sizes to run (default: the recorded ones)")
    parser.add_argument("--allow-no-references", action="store_true",
                        help="exit 0 when a model without references passes its smoke run")
    parser.add_argument("--tf", metavar="VERSION", default=None,
                        help="verify in TensorFlow VERSION (e.g. 2.19): a venv with that "
                             "tensorflow-cpu is built once under ~/.cache/jax2tf_native/tf_envs "
                             "($JAX2TF_NATIVE_TF_ENVS) and the same checks run there")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=reading_commands.run_verify)


def _add_tflite(subparsers) -> None:
    """Adds `tflite DIR --out FILE` (handler returns the exit code)."""
    parser = subparsers.add_parser(
        "tflite", help="convert a signature to TFLite and check the interpreter against the "
                       "recorded outputs",
        description="Converts with tf.lite.TFLiteConverter (TFLITE_BUILTINS only unless "
                    "--allow-select-tf-ops), runs the TFLite interpreter on the recorded "
                    "reference inputs and compares. Exit 0 passed, 1 mismatch, 2 unreadable "
                    "model, 3 no references, 4 not convertible.")
    parser.add_argument("dir", help="the SavedModel directory")
    parser.add_argument("--out", required=True, help="the .tflite file to write")
    parser.add_argument("--signature", default="serving_default",
                        help="the signature to convert (default: serving_default)")
    parser.add_argument("--batch-size", type=_positive_int, default=None, metavar="N",
                        help="fix a polymorphic batch to N (default: keep it dynamic)")
    parser.add_argument("--allow-select-tf-ops", action="store_true",
                        help="write a model needing SELECT_TF_OPS if builtins do not suffice")
    parser.add_argument("--allow-no-references", action="store_true",
                        help="exit 0 when a model without references converts and runs")
    parser.add_argument("--int8", action="store_true",
                        help="full-integer quantization (int8 inputs and outputs, "
                             "TFLITE_BUILTINS_INT8 only); needs --representative")
    parser.add_argument("--representative", metavar="FILE.npz", default=None,
                        help="with --int8: calibration inputs, one array per input name, "
                             "examples along axis 0")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=reading_commands.run_tflite)


def _add_tfjs(subparsers) -> None:
    """Adds `tfjs DIR --out OUT` (handler returns the exit code)."""
    parser = subparsers.add_parser(
        "tfjs", help="convert a SavedModel written with --no-xla to a TF.js graph model",
        description=_TFJS_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="the SavedModel directory (written with --no-xla)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the TF.js model directory to write")
    parser.add_argument("--signature", default="serving_default",
                        help="the signature to convert (default: serving_default)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    parser.set_defaults(handler=reading_commands.run_tfjs)
