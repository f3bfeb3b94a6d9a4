"""The `jax2tf-native` command line (also `python -m saved_model_tools`).

Only argparse wiring is imported with this module: each command's handler reaches its tool
through the package's lazy attributes (`saved_model_tools.demo`, ...; see the package
docstring), so `--help` and usage errors import neither TensorFlow nor JAX, and
`inspect`/`verify`/`tflite` never import JAX.
"""
from __future__ import annotations

import argparse
import os
import sys

import saved_model_tools
from saved_model_tools import commands, export_command, tfjs_command

# TF's C++ logging prints pages of warnings at import; the CLI shows its own progress instead.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _demo(args: argparse.Namespace) -> int:
    agree = saved_model_tools.demo.run(batch_sizes=args.batch_sizes, repeats=args.repeats)
    if args.out is None:
        return 0 if agree else 1
    print()
    try:
        verified = saved_model_tools.demo_saved_model.run(args.out)
    except FileExistsError as e:
        return commands.fail(args, str(e), 2)
    return 0 if agree and verified else 1


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
    demo.set_defaults(handler=_demo)
    export_command.add_export_command(subparsers)
    commands.add_inspect_command(subparsers)
    commands.add_verify_command(subparsers)
    commands.add_tflite_command(subparsers)
    tfjs_command.add_tfjs_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; a failure is one `jax2tf-native CMD: error: ...` line (exit != 0)."""
    argv, debug = commands.split_debug(argv)
    args = build_parser().parse_args(argv)
    return commands.run_handler(args, "jax2tf-native", debug)


if __name__ == "__main__":
    sys.exit(main())
