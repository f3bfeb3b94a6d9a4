"""Command line: `python -m tools.backcompat generate [--only NAME ...] [--force]`."""
from __future__ import annotations

import argparse
import pathlib
import sys

from tools.backcompat import artifacts, generate, storage


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.backcompat",
        description="Freeze JAX exports as back-compat artifacts for jax2tf-native's tests.")
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="write missing artifacts")
    gen.add_argument("--only", action="append", metavar="NAME",
                     help="only this artifact (repeatable); default: all")
    gen.add_argument("--force", action="store_true",
                     help="rewrite existing artifacts (normally never: old ones are the point)")
    gen.add_argument("--data-dir", type=pathlib.Path, default=storage.DEFAULT_DATA_DIR,
                     help=f"default: {storage.DEFAULT_DATA_DIR}")
    commands.add_parser("list", help="list the artifact names and descriptions")
    args = parser.parse_args(argv)
    if args.command == "list":
        for spec in artifacts.ARTIFACTS:
            print(f"{spec.name}: {spec.description}")
        return 0
    try:
        specs = artifacts.select(args.only)
    except ValueError as e:
        parser.error(str(e))
    written = generate.generate(specs, args.data_dir, force=args.force)
    print(f"{len(written)} artifact(s) written, {len(specs) - len(written)} kept, in "
          f"{args.data_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
