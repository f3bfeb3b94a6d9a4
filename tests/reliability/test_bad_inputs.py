"""A battery of bad inputs through the public API and the command line.

Each case must end in an exception (API) or a non-zero exit with one error line (CLI) whose
message names what was wrong; never a raw MLIR/StableHLO dump or a traceback. Every case also
checks that nothing was created, changed or left behind in its working directory (the writes
are atomic: a failed save leaves no model, no temporary directory, no new parent folders).

Cases that tests/jax2tf_native/test_errors.py and tests/saved_model_tools/test_writer.py already
cover are
not repeated here; this table adds the other variants.

The unwritable-output case needs a directory the process cannot write. When tests run as
root (CI does), chmod does not stop writes, so the target is a path under a regular file
instead; as another user it is a directory with mode 0o500.
"""
from __future__ import annotations

import dataclasses
import inspect as pyinspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
import saved_model_tools
from jax2tf_native import errors
from saved_model_tools import cli
from saved_model_tools import inspect as inspect_lib
from saved_model_tools import verify as verify_lib

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RAW_DUMP = re.compile(r"stablehlo\.|func\.func|module @|Traceback \(most recent")
USER_MODULE = "battery_user_model"

f32 = lambda *shape: np.ones(shape, np.float32)


def dense(params, x):
    return jnp.tanh(x @ params["w"])


PARAMS = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}


@pytest.fixture(scope="module")
def real_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("battery") / "model"
    saved_model_tools.save(path, dense, PARAMS, [f32(2, 4)], polymorphic_shapes=["(b, 4)"],
                           input_names=["x"])
    return path


@pytest.fixture(scope="module")
def blob() -> bytes:
    add = lambda x, y: jnp.sin(x) + y
    return bytes(jax.export.export(jax.jit(add))(f32(2, 3), f32(2, 3)).serialize())


@dataclasses.dataclass
class Ctx:
    """Inputs each case may use, created before the snapshot of the working directory."""
    tmp: Path
    blob: bytes
    a_file: Path          # a regular file
    empty_dir: Path
    corrupt_model: Path   # saved_model.pb that is not a proto
    truncated_model: Path  # a real model with saved_model.pb cut in half
    existing_model: Path  # a complete real model
    unwritable: Path      # a model path whose parent cannot be written
    params_npz: Path
    bad_npz: Path
    wrong_key_npz: Path   # the parameter saved as "W" where the function reads params["w"]
    versions_parent: Path  # TF Serving's layout: served/1 holds a real model


def _unwritable_target(tmp: Path, a_file: Path) -> Path:
    if os.geteuid() == 0:
        # Root ignores directory permissions: use a path whose parent is a regular file.
        return a_file / "model"
    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "model"


@pytest.fixture
def ctx(tmp_path, real_model, blob, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    a_file = work / "a_file"
    a_file.write_text("not a model")
    (work / "empty_dir").mkdir()
    (work / "corrupt_model").mkdir()
    (work / "corrupt_model" / "saved_model.pb").write_bytes(b"\x0a\xff\xff not a proto")
    shutil.copytree(real_model, work / "truncated_model")
    pb = work / "truncated_model" / "saved_model.pb"
    pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
    shutil.copytree(real_model, work / "existing_model")
    np.savez(work / "params.npz", w=PARAMS["w"])
    np.savez(work / "wrong_key.npz", W=PARAMS["w"])
    shutil.copytree(real_model, work / "served" / "1")
    (work / "bad.npz").write_bytes(b"PK\x03\x04 truncated zip")
    (work / f"{USER_MODULE}.py").write_text(
        "import jax.numpy as jnp\n"
        "CONSTANT = 3\n"
        "def apply(params, x):\n"
        "    return jnp.tanh(x @ params['w'])\n")
    # The CLI imports MODULE:FUNCTION from the current directory and puts it on sys.path.
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield Ctx(work, blob, a_file, work / "empty_dir", work / "corrupt_model",
              work / "truncated_model", work / "existing_model",
              _unwritable_target(work, a_file), work / "params.npz", work / "bad.npz",
              work / "wrong_key.npz", work / "served")
    sys.modules.pop(USER_MODULE, None)
    if (work / "locked").exists():
        (work / "locked").chmod(0o700)


def snapshot(root: Path) -> dict:
    """Every path under `root` with its size and modification time."""
    return {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0,
                                       p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def assert_clear(message: str) -> None:
    assert message.strip(), "empty error message"
    assert not RAW_DUMP.search(message), message[:3000]
    assert len(message) < 3000, message[:3000]


# ----------------------------------------------------------------------------------------------
# Public API

def _converted_call(fun, *args, **options):
    return jax2tf_native.convert(fun, **options)(*args)


def _call_exported(c, *args, **kwargs):
    return jax2tf_native.call_exported(c.blob)(*args, **kwargs)


def _unknown_rank(c):
    graph = tf.function(jax2tf_native.convert(jnp.sin), autograph=False,
                        input_signature=[tf.TensorSpec(None, tf.float32)])
    return graph.get_concrete_function()


def _lapack_options() -> dict:
    # If convert grows a linalg= switch whose default is portable, ask for the native kernels.
    params = pyinspect.signature(jax2tf_native.convert).parameters
    return {"linalg": "native"} if "linalg" in params else {}


def user_eigh(x):
    return jnp.linalg.eigh(x @ x.T)[0]


def _save(c, path, fn=dense, params=PARAMS, example_args=None, **kwargs):
    return saved_model_tools.save(path, fn, params,
                                  [f32(2, 4)] if example_args is None else example_args,
                                  **kwargs)


API_CASES = [
    # convert options
    ("convert_fun_is_a_string", lambda c: jax2tf_native.convert("jnp.sin"),
     TypeError, r"expects a callable JAX function, got str"),
    ("convert_fun_is_none", lambda c: jax2tf_native.convert(None),
     TypeError, r"callable JAX function, got NoneType"),
    ("convert_unknown_platform", lambda c: jax2tf_native.convert(jnp.sin,
                                                                 platforms=["cpu", "vulkan"]),
     ValueError, r"unknown: \['vulkan'\].*Fix"),
    ("convert_platforms_not_a_sequence", lambda c: jax2tf_native.convert(jnp.sin, platforms=3),
     TypeError, r"platforms must be a sequence of platform names, got 3"),
    ("convert_no_platforms", lambda c: jax2tf_native.convert(jnp.sin, platforms=[]),
     ValueError, r"non-empty subset"),
    ("convert_cache_size_zero", lambda c: jax2tf_native.convert(jnp.sin, cache_size=0),
     ValueError, r"cache size must be a positive int, got 0"),
    ("convert_unknown_gradient_mode",
     lambda c: jax2tf_native.convert(jnp.sin, gradient_mode="fast"),
     ValueError, r"gradient_mode must be one of .*got 'fast'"),
    ("convert_negative_gradient_order",
     lambda c: jax2tf_native.convert(jnp.sin, gradient_order=-1),
     ValueError, r"gradient_order must be None or an int >= 0, got -1"),
    ("convert_with_gradient_not_bool",
     lambda c: jax2tf_native.convert(jnp.sin, with_gradient="yes"),
     TypeError, r"with_gradient must be True or False, got 'yes'"),
    # arguments of a converted function
    ("call_with_none", lambda c: _converted_call(jnp.sin, None),
     TypeError, r"NoneType"),
    ("call_with_object", lambda c: _converted_call(jnp.sin, object()),
     errors.ArgumentTypeError, r"args\[0\] is object .*not an array.*Fix"),
    ("call_with_string_in_pytree",
     lambda c: _converted_call(lambda d: d["x"] * 2, {"x": f32(2), "y": "text"}),
     errors.ArgumentTypeError, r"args\[0\]\['y'\] is str \('text'\)"),
    ("call_with_string_tensor", lambda c: _converted_call(jnp.sin, tf.constant(["a", "b"])),
     errors.ArgumentTypeError, r"args\[0\]: TF dtype string cannot be passed"),
    ("call_scalar_for_rank_2_spec",
     lambda c: _converted_call(jnp.sin, np.float32(1), polymorphic_shapes=["(b, 3)"]),
     errors.PolymorphicShapeError, r"'\(b, 3\)' for args\[0\] has 2 dimension.*rank 0"),
    ("call_wrong_constant_dim_eagerly",
     lambda c: _converted_call(jnp.sin, f32(2, 4), polymorphic_shapes=["(b, 3)"]),
     errors.PolymorphicShapeError, r"args\[0\] \(actual shape \(2, 4\)\).*different size 3"),
    ("call_dim_variable_conflict_inside_pytree",
     lambda c: _converted_call(lambda d: d["p"][:, 0] + d["q"], {"p": f32(3, 2), "q": f32(4)},
                               polymorphic_shapes=[{"p": "(n, 2)", "q": "(n,)"}]),
     errors.ArgumentShapeError, r"args\[0\]\['q'\]\.shape\[0\] = 4.*`n` = 3 from "
                                r"args\[0\]\['p'\]\.shape\[0\]"),
    ("polymorphic_shapes_dict_keys_differ",
     lambda c: _converted_call(lambda d: d["a"], {"a": f32(2)}, polymorphic_shapes=[{"b": "n"}]),
     errors.PolymorphicShapeError, r"does not match the positional arguments.*\{'b': \*\}"),
    ("tf_function_unknown_rank", _unknown_rank,
     errors.ArgumentTypeError, r"args\[0\] has unknown rank while tracing.*input_signature"),
    ("input_signature_constant_dim",
     lambda c: jax2tf_native.input_signature([f32(2, 3)], ["(b, 4)"]),
     errors.PolymorphicShapeError, r"different size 4 for known dimension"),
    ("non_allowlisted_custom_call",
     lambda c: _converted_call(user_eigh, f32(3, 3), **_lapack_options()),
     errors.CustomCallNotAllowedError,
     r"'lapack_ssyevd_ffi'.*test_bad_inputs\.py:\d+.*Fix:.*DisabledSafetyCheck\.custom_call"),
    # exported artifacts
    ("call_exported_wrong_dtype", lambda c: _call_exported(c, np.ones((2, 3), np.complex64),
                                                           f32(2, 3)),
     errors.ArgumentTypeError, r"args\[0\] has dtype complex64, but .* float32"),
    ("call_exported_extra_argument", lambda c: _call_exported(c, f32(2, 3), f32(2, 3), f32(1)),
     errors.ArgumentTypeError, r"exported for arguments structured as .*called with"),
    ("call_exported_keyword_instead_of_positional",
     lambda c: _call_exported(c, f32(2, 3), y=f32(2, 3)),
     errors.ArgumentTypeError, r"called with PyTreeDef\(\(\(\*,\), \{'y': \*\}\)\)"),
    ("call_exported_none_argument", lambda c: _call_exported(c, None, f32(2, 3)),
     errors.ArgumentTypeError, r"called with PyTreeDef\(\(\(None, \*\)"),
    ("call_exported_list_of_ints", lambda c: jax2tf_native.call_exported([1, 2, 3]),
     TypeError, r"expects a jax.export.Exported or the bytes .*got list"),
    ("deserialize_truncated_bytes", lambda c: jax2tf_native.deserialize(c.blob[:10]),
     errors.ExportedModuleError, r"the 10 bytes .*truncated, corrupt.*Fix"),
    ("deserialize_empty_bytes", lambda c: jax2tf_native.deserialize(b""),
     errors.ExportedModuleError, r"the 0 bytes"),
    ("deserialize_garbage", lambda c: jax2tf_native.deserialize(bytes(range(256)) * 2),
     errors.ExportedModuleError, r"the 512 bytes .*not from Exported\.serialize"),
    # writing SavedModels: each must leave nothing behind
    ("save_to_unwritable_directory", lambda c: _save(c, c.unwritable),
     OSError, r"(?i)(permission denied|not a directory).*Fix"),
    ("save_onto_a_regular_file", lambda c: _save(c, c.a_file, overwrite=True),
     NotADirectoryError, r"a_file exists and is not a directory"),
    ("save_over_existing_model_without_overwrite", lambda c: _save(c, c.existing_model),
     FileExistsError, r"existing_model already exists.*overwrite"),
    ("save_unknown_platform", lambda c: _save(c, c.tmp / "new" / "1", platforms=["nope"]),
     ValueError, r"unknown: \['nope'\]"),
    ("save_example_arg_is_none",
     lambda c: _save(c, c.tmp / "new", example_args=[None], polymorphic_shapes=["(b, 4)"]),
     TypeError, r"example_args\[0\].*None|None.*example_args\[0\]"),
    ("save_params_with_string_leaf", lambda c: _save(c, c.tmp / "new", params={"w": "abc"}),
     errors.ArgumentTypeError, r"params leaf params/w cannot become a tf.Variable"),
    ("save_spec_constant_disagrees_with_example",
     lambda c: _save(c, c.tmp / "new" / "1", polymorphic_shapes=["(b, 5)"]),
     errors.PolymorphicShapeError, r"'\(b, 5\)' for args\[0\] .*different size 5"),
    # qr with unrelated symbolic m, n exports portably, but JAX's own differentiation rule
    # for qr compares m with n: the gradient TF traces while saving cannot be exported. That
    # must be our error with JAX's reason, before anything is written (not TF's "Error when
    # tracing gradients" naming a graph op).
    ("save_model_whose_gradient_cannot_be_exported",
     lambda c: _save(c, c.tmp / "new",
                     fn=lambda p, x: jnp.linalg.qr(x)[1] * p["w"][0, 0],
                     example_args=[f32(3, 3)], polymorphic_shapes=["(m, n)"]),
     jax2tf_native.GradientSpecError,
     r"gradient cannot be exported.*InconclusiveDimensionOperation.*'m' < 'n' is "
     r"inconclusive.*Fix: save with with_gradient=False"),
    ("save_exported_truncated_bytes",
     lambda c: saved_model_tools.save_exported(c.tmp / "new", c.blob[: len(c.blob) // 2]),
     errors.ExportedModuleError, r"truncated, corrupt"),
    # reading SavedModels
    ("inspect_missing_directory", lambda c: inspect_lib.inspect_saved_model(c.tmp / "missing"),
     inspect_lib.SavedModelReadError, r"missing does not exist.*Fix"),
    ("inspect_directory_without_model",
     lambda c: inspect_lib.inspect_saved_model(c.empty_dir),
     inspect_lib.SavedModelReadError, r"empty_dir has no saved_model.pb.*Fix"),
    ("inspect_corrupt_saved_model_pb",
     lambda c: inspect_lib.inspect_saved_model(c.corrupt_model),
     inspect_lib.SavedModelReadError, r"corrupt_model/saved_model.pb is corrupt.*Fix"),
    ("inspect_truncated_saved_model_pb",
     lambda c: inspect_lib.inspect_saved_model(c.truncated_model),
     inspect_lib.SavedModelReadError, r"truncated_model/saved_model.pb is corrupt"),
    ("inspect_a_regular_file", lambda c: inspect_lib.inspect_saved_model(c.a_file),
     inspect_lib.SavedModelReadError, r"a_file is a file, not a SavedModel directory"),
    ("verify_missing_directory", lambda c: verify_lib.verify(c.tmp / "missing"),
     inspect_lib.SavedModelReadError, r"missing does not exist|missing is not a directory"),
    ("verify_directory_without_model", lambda c: verify_lib.verify(c.empty_dir),
     inspect_lib.SavedModelReadError, r"empty_dir has no saved_model.pb"),
    ("verify_zero_batch_size", lambda c: verify_lib.verify(c.existing_model, batch_sizes=[0]),
     ValueError, r"batch_sizes must be positive ints, got \(0,\)"),
]


@pytest.mark.parametrize("run, error, pattern",
                         [pytest.param(*case[1:], id=case[0]) for case in API_CASES])
def test_api_bad_input_fails_clearly_and_leaves_nothing(ctx, run, error, pattern):
    before = snapshot(ctx.tmp)
    with pytest.raises(error) as info:
        run(ctx)
    message = str(info.value)
    assert re.search(pattern, message, re.S), f"{type(info.value).__name__}: {message}"
    assert_clear(message)
    assert ".tmp-" not in message, "the error names our temporary directory, not the target"
    assert snapshot(ctx.tmp) == before


def test_api_battery_has_at_least_30_distinct_cases():
    assert len({case[0] for case in API_CASES}) == len(API_CASES) >= 30


# ----------------------------------------------------------------------------------------------
# Command line, in process: `saved_model_tools.cli.main(argv)` with its exit code and stderr.

def _export(c, *extra, function=f"{USER_MODULE}:apply", out=None):
    out = str(c.tmp / "out" if out is None else out)
    return ["export", function, "--params", str(c.params_npz), *extra, "--out", out]


CLI_CASES = [
    ("export_function_without_module", lambda c: _export(c, "--input", "x:float32[b,4]",
                                                        function="apply"),
     2, r"'apply' is not MODULE:FUNCTION\. Fix"),
    ("export_module_does_not_exist",
     lambda c: _export(c, "--input", "x:float32[b,4]", function="no_such_module_x:apply"),
     2, r"cannot import module 'no_such_module_x'.*Fix"),
    ("export_function_does_not_exist",
     lambda c: _export(c, "--input", "x:float32[b,4]", function=f"{USER_MODULE}:nope"),
     2, rf"module '{USER_MODULE}' has no 'nope'\. Fix"),
    ("export_target_is_not_a_function",
     lambda c: _export(c, "--input", "x:float32[b,4]", function=f"{USER_MODULE}:CONSTANT"),
     2, r"CONSTANT is a int, not a function"),
    ("export_input_without_dims", lambda c: _export(c, "--input", "x:float32"),
     2, r"--input 'x:float32' is not NAME:DTYPE\[DIMS\]\. Fix"),
    ("export_unknown_dtype", lambda c: _export(c, "--input", "x:floaty[b,4]"),
     2, r"--input 'x:floaty\[b,4\]': unknown dtype 'floaty'\. Fix: --input x:float32\[b,4\] "
        r"\(dtypes: float32 \(float, f32\), "),
    ("export_params_file_missing",
     lambda c: ["export", f"{USER_MODULE}:apply", "--params", str(c.tmp / "nope.npz"),
                "--input", "x:float32[b,4]", "--out", str(c.tmp / "out")],
     2, r"--params .*nope\.npz: no such file"),
    ("export_params_file_corrupt",
     lambda c: ["export", f"{USER_MODULE}:apply", "--params", str(c.bad_npz),
                "--input", "x:float32[b,4]", "--out", str(c.tmp / "out")],
     2, r"bad\.npz is not a readable \.npz file.*Fix"),
    ("export_no_inputs", lambda c: _export(c), 2, r"give at least one --input"),
    ("export_missing_out",
     lambda c: ["export", f"{USER_MODULE}:apply", "--input", "x:float32[b,4]"],
     2, r"the following arguments are required: --out"),
    ("export_unknown_platform",
     lambda c: _export(c, "--input", "x:float32[b,4]", "--platforms", "cpu,vulkan"),
     2, r"--platforms cpu,vulkan: unknown platform\(s\) \['vulkan'\]\. Fix: a comma-separated "
        r"subset of cpu, cuda, rocm, tpu \(gpu means cuda\), e\.g\. --platforms cpu,cuda\."),
    ("export_unknown_target_tf",
     lambda c: _export(c, "--input", "x:float32[b,4]", "--target-tf", "2.99"),
     2, r"--target-tf 2\.99: not a TensorFlow version we measured; supported: 2\.17, .*2\.21\. "
        r"Fix: the serving TF's major\.minor version, e\.g\. --target-tf 2\.20"),
    # Issue 37: JAX's raw TypeError, exit 1, before; now the input, expected vs got, the fix.
    ("export_inputs_disagree_with_params", lambda c: _export(c, "--input", "x:float32[b,5]"),
     2, rf"--input x:float32\[b,5\] does not fit {USER_MODULE}:apply: dimension 1 of x is 5 "
        rf"where the function needs 4 \({USER_MODULE}\.py:4 `return jnp\.tanh\(x @ "
        rf"params\['w'\]\)`: dot_general requires .*\)\. Fix: --input x:float32\[b,4\]\.$"),
    ("export_params_key_misspelt",
     lambda c: ["export", f"{USER_MODULE}:apply", "--params", str(c.wrong_key_npz),
                "--input", "x:float32[b,4]", "--out", str(c.tmp / "out")],
     2, rf"{USER_MODULE}:apply reads params\['w'\], which --params .*wrong_key\.npz does not "
        rf"have: under the top level it has \['W'\]\. Fix: store that parameter under the key "
        rf"'w' in the file \(the file has 'W'\)"),
    ("export_without_params",
     lambda c: ["export", f"{USER_MODULE}:apply", "--input", "x:float32[b,4]",
                "--out", str(c.tmp / "out")],
     2, rf"{USER_MODULE}:apply reads params\['w'\], and no --params was given\. Fix: pass "
        rf"--params FILE\.npz"),
    ("export_over_existing_model_without_overwrite",
     lambda c: _export(c, "--input", "x:float32[b,4]", out=c.existing_model),
     1, r"existing_model already exists\..*--overwrite"),
    ("export_to_unwritable_directory",
     lambda c: _export(c, "--input", "x:float32[b,4]", out=c.unwritable),
     1, r"(?i)(permission denied|not a directory).*Fix"),
    ("inspect_missing_directory", lambda c: ["inspect", str(c.tmp / "missing")],
     2, r"missing does not exist"),
    ("inspect_corrupt_model", lambda c: ["inspect", str(c.corrupt_model)],
     2, r"saved_model.pb is corrupt"),
    ("verify_directory_without_model", lambda c: ["verify", str(c.empty_dir)],
     2, r"has no saved_model.pb"),
    ("verify_parent_of_version_folders", lambda c: ["verify", str(c.versions_parent)],
     2, r"served has no saved_model\.pb: it holds TF Serving version folders \['1'\]\. Fix: "
        r"pass a version's folder, e\.g\. \S+/served/1 \(the newest\)"),
    ("verify_zero_batch_size", lambda c: ["verify", str(c.existing_model), "--batch-sizes", "0"],
     2, r"expected a positive integer, got '0'"),
    ("tflite_missing_directory",
     lambda c: ["tflite", str(c.tmp / "missing"), "--out", str(c.tmp / "m.tflite")],
     2, r"missing does not exist"),
]


@pytest.mark.parametrize("argv, code, pattern",
                         [pytest.param(*case[1:], id=case[0]) for case in CLI_CASES])
def test_cli_bad_input_exits_nonzero_with_one_clear_error(ctx, capsys, argv, code, pattern):
    before = snapshot(ctx.tmp)
    try:
        got = cli.main(argv(ctx))
    except SystemExit as e:   # argparse usage errors
        got = e.code
    err = capsys.readouterr().err
    assert got == code, err
    assert re.search(pattern, err, re.S), err
    assert_clear(err)
    assert ".tmp-" not in err, "the error names our temporary directory, not the target"
    assert snapshot(ctx.tmp) == before


def test_cli_process_exit_code_and_stderr_for_a_missing_module(tmp_path):
    """One real process: `python -m saved_model_tools export` fails before importing TF or JAX."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "saved_model_tools", "export", "no_such_module_y:f", "--input",
         "x:float32[b]", "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "jax2tf-native export: error: cannot import module 'no_such_module_y': No module named "
        "'no_such_module_y'. Fix: run from the directory that contains it, or install it."]
    assert os.listdir(tmp_path) == []
