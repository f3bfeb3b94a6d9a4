"""The `jax2tf-native` command line (also `python -m saved_model_tools`).

  parser            -- the one argument parser: every command, its options and its handler.
  failures          -- one `jax2tf-native CMD: error: ...` line per failure, --debug, exit codes.
  export            -- `export MODULE:FUNCTION`: its cheap checks, then save and verify.
  reading_commands  -- `inspect`, `verify`, `tflite`, `tfjs` (no JAX).
  demo              -- `demo`.

Only argparse wiring and the handlers are imported with this package: each handler reaches its
tool through the package's lazy attributes (`saved_model_tools.inspect`, `.save`, ...; see the
`saved_model_tools` docstring), so `--help` and usage errors import neither TensorFlow nor
JAX, and `inspect`/`verify`/`tflite`/`tfjs` never import JAX.
"""
from __future__ import annotations

import os

from saved_model_tools.cli import failures
from saved_model_tools.cli.parser import build_parser

# TF's C++ logging prints pages of warnings at import; the CLI shows its own progress instead.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str] | None = None) -> int:
    """Runs one command; a failure is one `jax2tf-native CMD: error: ...` line (exit != 0).

    Example:
        >>> from saved_model_tools import cli
        >>> cli.main(["inspect", "/no/such/model"])
        2
    """
    argv, debug = failures.split_debug(argv)
    args = build_parser().parse_args(argv)
    return failures.run_handler(args, "jax2tf-native", debug)


__all__ = ["build_parser", "main"]
