"""argparse wiring for `jax2tf-native inspect | verify | tflite` (none of them needs JAX).

`saved_model_tools/cli.py` adds these to its sub-commands; `python -m saved_model_tools.commands`
runs them alone, e.g. on a serving host where JAX is not installed. Nothing heavy is imported
until a command runs: the handlers reach the tools through the package's lazy attributes.

Exit codes: 0 passed; 1 a mismatch or a failed call; 2 bad usage or an unreadable SavedModel;
3 nothing recorded to compare with (a smoke run only; `--allow-no-references` turns a passing
smoke run into 0); 4 (tflite) the converter refused the model.

Every failure prints one `PROG: error: ...` line on stderr and no traceback; `--debug` (anywhere
on the command line) re-raises instead, with the traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import saved_model_tools

EXIT_UNREADABLE = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def one_line(text: str, limit: int = 2000) -> str:
    """`text` on one line (multi-line messages joined), at most `limit` characters."""
    joined = " ".join(str(text).split())
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


def fail(args: argparse.Namespace, message: str, code: int, *, listed: bool = False) -> int:
    """Prints one error line for `args.prog` and returns `code`; re-raises under --debug.

    With `listed`, a message whose later lines list several problems ("  - ...") keeps one
    line per problem (at most 20), the first line being the error line."""
    if getattr(args, "debug", False) and sys.exc_info()[0] is not None:
        raise
    prog = getattr(args, "prog", None) or f"jax2tf-native {getattr(args, 'command', '')}".strip()
    head, *items = str(message).split("\n  - ") if listed else [message]
    print(f"{prog}: error: {one_line(head)}", file=sys.stderr)
    for item in items[:20]:
        print(f"  - {one_line(item, 1000)}", file=sys.stderr)
    if len(items) > 20:
        print(f"  ... and {len(items) - 20} more", file=sys.stderr)
    return code


def split_debug(argv: list[str] | None) -> tuple[list[str], bool]:
    """(argv without `--debug`, whether it was there): --debug may follow any sub-command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return [a for a in argv if a != "--debug"], "--debug" in argv


def run_handler(args: argparse.Namespace, prog: str, debug: bool) -> int:
    """Runs the sub-command; any exception it lets escape becomes one error line, exit 1."""
    args.prog, args.debug = f"{prog} {args.command}", debug
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"{args.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return fail(args, f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)


def _unreadable(args: argparse.Namespace, error: Exception) -> int:
    return fail(args, str(error), EXIT_UNREADABLE)


def _inspect(args: argparse.Namespace) -> int:
    inspect_lib = saved_model_tools.inspect
    try:
        report = inspect_lib.inspect_saved_model(args.dir, mlir=args.mlir)
    except (inspect_lib.SavedModelReadError, ValueError) as e:
        return _unreadable(args, e)
    sys.stdout.write(report.to_json() if args.json else report.format())
    return 0


def _verify(args: argparse.Namespace) -> int:
    verify_lib, tf_envs = saved_model_tools.verify, saved_model_tools.tf_envs
    SavedModelReadError = saved_model_tools.inspect.SavedModelReadError
    python = None
    if args.tf is not None:
        try:
            python = tf_envs.ensure_tf_env(
                tf_envs.check_version(args.tf),
                progress=lambda line: print(f"[verify --tf {args.tf}] {line}", file=sys.stderr,
                                            flush=True))
        except (ValueError, tf_envs.TfEnvError) as e:
            return fail(args, str(e),
                        EXIT_UNREADABLE if isinstance(e, ValueError) else verify_lib.EXIT_FAILED)
    try:
        report = verify_lib.verify(args.dir, batch_sizes=args.batch_sizes, python=python)
    except SavedModelReadError as e:
        return _unreadable(args, e)
    except verify_lib.VerifyError as e:
        return fail(args, str(e), verify_lib.EXIT_FAILED)
    sys.stdout.write(report.to_json() if args.json else report.format())
    if report.status == "no-references" and args.allow_no_references:
        return verify_lib.EXIT_PASSED
    return report.exit_code


def _tflite_int8(args: argparse.Namespace) -> int:
    """`tflite --int8 --representative FILE.npz`: full-integer quantization (tflite_int8)."""
    try:
        report = saved_model_tools.tflite_int8.quantize_int8(
            args.dir, args.out, Path(args.representative), signature=args.signature)
    except (OSError, ValueError, KeyError) as e:
        return _unreadable(args, e.args[0] if isinstance(e, KeyError) and e.args else e)
    sys.stdout.write(report.to_json() if args.json else _int8_text(report))
    return {"quantized": 0, "failed": 1}.get(report.status,
                                             saved_model_tools.tflite.EXIT_NOT_CONVERTED)


def _int8_text(report) -> str:
    lines = [f"tflite --int8 {report.saved_model_dir} [{report.signature}]: {report.status}"]
    if report.ok:
        lines.append(f"wrote {report.out_file}; operators "
                     + ", ".join(f"{k} x{v}" for k, v in report.operators.items())
                     + f"; float tensors {report.float_tensors}")
        lines += [f"  {a.output} vs JAX ({a.examples} recorded rows): max|diff| "
                  f"{a.max_abs_error:.3g} ({a.relative_error:.2%} of max|JAX|)"
                  + ("" if a.argmax_agreement is None
                     else f", argmax agreement {a.argmax_agreement:.0%}")
                  for a in report.accuracy]
    lines += [f"  {e}" for e in report.conversion_errors]
    if report.run_error:
        lines.append(f"  {report.run_error}")
    return "\n".join(lines) + "\n"


def _tflite(args: argparse.Namespace) -> int:
    if args.int8 or args.representative:
        if not (args.int8 and args.representative):
            return fail(args, "--int8 needs --representative FILE.npz (one array per input, "
                              "examples along axis 0), and --representative needs --int8",
                        EXIT_UNREADABLE)
        return _tflite_int8(args)
    tflite_lib = saved_model_tools.tflite
    SavedModelReadError = saved_model_tools.inspect.SavedModelReadError
    ManifestError = saved_model_tools.manifest.ManifestError
    try:
        report = tflite_lib.convert_to_tflite(
            args.dir, args.out, signature=args.signature, batch_size=args.batch_size,
            allow_select_tf_ops=args.allow_select_tf_ops)
    except (SavedModelReadError, ManifestError) as e:
        return _unreadable(args, e)
    except KeyError as e:
        return _unreadable(args, e.args[0] if e.args else e)
    sys.stdout.write(report.to_json() if args.json else report.format())
    if report.status == "no-references" and args.allow_no_references:
        return 0
    return report.exit_code


def add_inspect_command(subparsers) -> argparse.ArgumentParser:
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
    parser.set_defaults(handler=_inspect)
    return parser


def add_verify_command(subparsers) -> argparse.ArgumentParser:
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
    parser.set_defaults(handler=_verify)
    return parser


def add_tflite_command(subparsers) -> argparse.ArgumentParser:
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
    parser.set_defaults(handler=_tflite)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m saved_model_tools.commands",
        description="Inspect, verify and convert SavedModels without JAX.")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failure (may follow any command)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_inspect_command(commands)
    add_verify_command(commands)
    add_tflite_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv, debug = split_debug(argv)
    args = build_parser().parse_args(argv)
    return run_handler(args, "saved_model_tools", debug)


if __name__ == "__main__":
    sys.exit(main())
