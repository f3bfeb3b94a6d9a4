"""The handlers of `jax2tf-native inspect | verify | tflite | tfjs`: none of them needs JAX.

Each reaches its tool through the package's lazy attributes (`saved_model_tools.inspect`, ...),
so that nothing heavy is imported before a command runs, and returns the exit code: 0 passed;
1 a mismatch or a failed call; 2 bad usage or an unreadable SavedModel; 3 nothing recorded to
compare with (a smoke run only; `--allow-no-references` turns a passing smoke run into 0);
4 (tflite) the converter refused the model, (tfjs) TF.js cannot run it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import saved_model_tools
from saved_model_tools.cli.failures import EXIT_UNREADABLE, fail

EXIT_NOT_CONVERTIBLE = 4  # tfjs: TF.js cannot run the model


def _unreadable(args: argparse.Namespace, error: Exception) -> int:
    return fail(args, str(error), EXIT_UNREADABLE)


def run_inspect(args: argparse.Namespace) -> int:
    inspect_lib = saved_model_tools.inspect
    try:
        report = inspect_lib.inspect_saved_model(args.dir, mlir=args.mlir)
    except (inspect_lib.SavedModelReadError, ValueError) as e:
        return _unreadable(args, e)
    sys.stdout.write(report.to_json() if args.json else report.format())
    return 0


def run_verify(args: argparse.Namespace) -> int:
    verify_lib, tf_envs = saved_model_tools.verify, saved_model_tools.verify.tf_envs
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
    """`tflite --int8 --representative FILE.npz`: full-integer quantization (tflite.int8)."""
    try:
        report = saved_model_tools.tflite.quantize_int8(
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


def run_tflite(args: argparse.Namespace) -> int:
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


def run_tfjs(args: argparse.Namespace) -> int:
    tfjs_lib = saved_model_tools.tfjs
    try:
        report = tfjs_lib.convert_to_tfjs(args.dir, args.out, signature=args.signature,
                                          overwrite=args.overwrite)
    except FileExistsError:
        return fail(args, f"{args.out} already exists. Fix: add --overwrite, or choose "
                                   f"a new --out directory.", 1)
    except tfjs_lib.TfjsExportError as e:
        code = 2 if "has no signature" in str(e) else EXIT_NOT_CONVERTIBLE
        return fail(args, str(e), code, listed=True)
    except OSError as e:
        return fail(args, f"cannot read the SavedModel {args.dir}: {e}", 2)
    print(f"wrote {report.out_dir} (TF.js graph model, {report.shards} weight shard(s), "
          f"{report.weight_bytes} bytes)")
    for kind, specs in (("input", report.inputs), ("output", report.outputs)):
        for name, (dtype, shape) in specs.items():
            print(f"  {kind} {name}: {dtype}{['?' if d is None else d for d in shape]}")
    print(f"  {len(report.op_types)} op types; call with model."
          f"{'executeAsync' if report.needs_execute_async else 'execute (or executeAsync)'}")
    return 0
