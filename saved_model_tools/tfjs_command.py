"""`jax2tf-native tfjs DIR --out OUT`: a plain-ops SavedModel as a TF.js graph model (no JAX).

Exit 0 written, 2 unreadable SavedModel or unknown signature, 4 not runnable in TF.js (each op or
dtype named; nothing written), 1 the output exists (without --overwrite).
For a JAX function: `jax2tf-native export MODULE:FN ... --no-xla --out SM` first.
"""
from __future__ import annotations

import argparse

import saved_model_tools
from saved_model_tools import commands

EXIT_NOT_CONVERTIBLE = 4

_DESCRIPTION = """\
Writes a SavedModel saved with plain TF ops (export --no-xla) as a TF.js graph model
(model.json and weight shards); no JAX needed. For a JAX function, run
jax2tf-native export MODULE:FUNCTION ... --no-xla --out DIR first.

Exit codes: 0 written; 1 the output exists (without --overwrite); 2 an unreadable SavedModel
or unknown signature; 4 TF.js cannot run the model (each op or dtype named, with the line of
the JAX code it came from; nothing written).
"""


def _tfjs(args: argparse.Namespace) -> int:
    tfjs_lib = saved_model_tools.tfjs
    try:
        report = tfjs_lib.convert_to_tfjs(args.dir, args.out, signature=args.signature,
                                          overwrite=args.overwrite)
    except FileExistsError:
        return commands.fail(args, f"{args.out} already exists. Fix: add --overwrite, or choose "
                                   f"a new --out directory.", 1)
    except tfjs_lib.TfjsExportError as e:
        code = 2 if "has no signature" in str(e) else EXIT_NOT_CONVERTIBLE
        return commands.fail(args, str(e), code, listed=True)
    except OSError as e:
        return commands.fail(args, f"cannot read the SavedModel {args.dir}: {e}", 2)
    print(f"wrote {report.out_dir} (TF.js graph model, {report.shards} weight shard(s), "
          f"{report.weight_bytes} bytes)")
    for kind, specs in (("input", report.inputs), ("output", report.outputs)):
        for name, (dtype, shape) in specs.items():
            print(f"  {kind} {name}: {dtype}{['?' if d is None else d for d in shape]}")
    print(f"  {len(report.op_types)} op types; call with model."
          f"{'executeAsync' if report.needs_execute_async else 'execute (or executeAsync)'}")
    return 0


def add_tfjs_command(subparsers) -> argparse.ArgumentParser:
    """Adds `tfjs DIR --out OUT` (handler returns the exit code)."""
    parser = subparsers.add_parser(
        "tfjs", help="convert a SavedModel written with --no-xla to a TF.js graph model",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="the SavedModel directory (written with --no-xla)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the TF.js model directory to write")
    parser.add_argument("--signature", default="serving_default",
                        help="the signature to convert (default: serving_default)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    parser.set_defaults(handler=_tfjs)
    return parser
