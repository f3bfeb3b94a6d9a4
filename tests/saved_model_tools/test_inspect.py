"""`inspect`: signatures, XlaCallModule ops, variables and oldest TF, read without JAX."""
import collections
import json

import jax
import numpy as np
import pytest
from tensorflow.core.protobuf import saved_model_pb2

from saved_model_tools import manifest
from saved_model_tools import cli
from saved_model_tools.cli.failures import EXIT_UNREADABLE
from saved_model_tools import inspect as inspect_lib
from tests.saved_model_tools.conftest import run_without_jax
from tf_ops import versions
from jax2tf_native import example_model

MATRIX = json.loads(inspect_lib.TF_VERSION_MATRIX_FILE.read_text())["tf"]


def _version(text):
    return tuple(int(p) for p in text.split("."))


def _oldest_tf_for(stablehlo_version, calling_convention):
    """Independent reading of the matrix: the oldest TF from which all newer ones qualify."""
    ok = [v for v, e in MATRIX.items()
          if calling_convention <= e["info"]["max_calling_convention"]
          and _version(e["info"]["stablehlo_minimum"]) <= _version(stablehlo_version)
          <= _version(e["info"]["stablehlo_current"])]
    ordered = sorted(MATRIX, key=_version)
    oldest = None
    for v in reversed(ordered):
        if v not in ok:
            break
        oldest = v
    return oldest


def _module_ops(path):
    """(function name, module bytes, attrs) of every XlaCallModule op, parsed here directly."""
    proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    return [(f.signature.name, n.attr["module"].s, n.attr)
            for f in proto.meta_graphs[0].graph_def.library.function for n in f.node_def
            if n.op == "XlaCallModule"]


def test_cnn_report_matches_model_and_jax(cnn_model, cnn_params):
    report = inspect_lib.inspect_saved_model(cnn_model, mlir=True)
    recorded = manifest.read(cnn_model)
    assert report.manifest == recorded

    assert [s.name for s in report.signatures] == ["classify", "serving_default"]
    main = report.signature("serving_default")
    assert main.method_name == "tensorflow/serving/predict"
    (images,) = main.inputs
    assert (images.name, images.dtype, images.shape) == ("images", "float32", (None, 28, 28, 1))
    assert images.polymorphic_dims == (0,)
    assert images.polymorphic_shape == example_model.POLYMORPHIC_SHAPE
    assert images.tensor_name == "serving_default_images:0"
    assert [(t.name, t.dtype, t.shape) for t in main.outputs] == [("logits", "float32",
                                                                  (None, 10))]
    assert main.reference_batch_sizes == tuple(
        r.batch_size for r in recorded.signature("serving_default").references)
    assert len(main.reference_batch_sizes) >= 2
    classify = report.signature("classify")
    assert [(t.name, t.dtype, t.shape) for t in classify.outputs] == [("class", "int32",
                                                                       (None,))]

    # Variables: the parameters, by count and bytes.
    leaves = jax.tree.leaves(cnn_params)
    assert report.variable_count == len(leaves) == recorded.variable_count
    assert report.variable_bytes == sum(np.asarray(p).nbytes for p in leaves)
    assert sorted(v.shape for v in report.variables) == sorted(np.shape(p) for p in leaves)

    # Modules: de-duplicated by content, counted against a direct parse of saved_model.pb.
    ops = _module_ops(cnn_model)
    assert report.xla_call_module_ops == len(ops)
    by_bytes = collections.Counter(module for _, module, _ in ops)
    assert sorted(m.copies for m in report.modules) == sorted(by_bytes.values())
    assert {m.size_bytes for m in report.modules} == {len(b) for b in by_bytes}

    exported = jax.export.export(jax.jit(example_model.apply))(
        cnn_params, jax.ShapeDtypeStruct((2, 28, 28, 1), np.float32))
    served = [m for m in report.modules if "serving_default" in m.signatures]
    assert served, "no module is reached from serving_default"
    for module in served:
        assert module.calling_convention_version == exported.calling_convention_version
        assert module.platforms == tuple(p.upper() for p in exported.platforms)
        assert module.stablehlo_version == versions.tf_stablehlo_version()
        assert module.deserializes_in_installed_tf and module.deserialize_error is None
        assert "stablehlo.convolution" in module.mlir
        assert "tensor<?x28x28x1xf32>" in module.main_signature
        targets = {c.target: c for c in module.custom_calls}
        assert targets["shape_assertion"].allowed and targets["shape_assertion"].runs_in_tf
        assert module.tf_support.oldest_tf == _oldest_tf_for(
            module.stablehlo_version, module.calling_convention_version)
        assert set(module.functions) & set(main.functions)
    assert report.tf_support.oldest_tf == served[0].tf_support.oldest_tf

    text = report.format()
    assert "images: float32[?, 28, 28, 1]  (polymorphic_shapes '(b, 28, 28, 1)')" in text
    assert f"Oldest TF that runs the signatures: {report.tf_support.oldest_tf}" in text
    assert "stablehlo.convolution" in text  # the StableHLO was printed (mlir=True)
    assert json.loads(report.to_json())["variable_count"] == report.variable_count


def test_peer_model_without_manifest(peer_model):
    report = inspect_lib.inspect_saved_model(peer_model)
    assert report.manifest is None and report.warmup_requests is None
    ops = _module_ops(peer_model)
    # The peer stores the forward and VJP modules in two copies each.
    assert report.xla_call_module_ops == len(ops) == 4
    assert sum(m.copies for m in report.modules) == 4
    (sig,) = report.signatures
    assert sig.polymorphic_inputs == {"x": (0,)}
    served = [m for m in report.modules if m.signatures == ("serving_default",)]
    assert len(served) == 1
    module = served[0]
    header = ops[0][1][:40]
    assert f"StableHLO_v{module.stablehlo_version}".encode() in header
    assert module.deserializes_in_installed_tf
    assert "stablehlo.tanh" in inspect_lib.module_text(
        next(b for f, b, _ in ops if f in module.functions))[0]
    assert module.tf_support.oldest_tf == _oldest_tf_for(module.stablehlo_version,
                                                         module.calling_convention_version)
    assert report.variable_count == 1 and report.variable_bytes == 3 * 4 * 4
    assert "no jax2tf-native manifest" in report.format()


def test_tf_support_rule_and_custom_call_marks():
    matrix = inspect_lib.load_tf_version_matrix()
    newest = max(MATRIX, key=_version)
    oldest = min(MATRIX, key=_version)
    old_info = MATRIX[oldest]["info"]
    # A module any TF of the matrix reads.
    support = inspect_lib.tf_support(old_info["max_calling_convention"],
                                     old_info["stablehlo_current"], (), matrix)
    assert support.oldest_tf == oldest
    # A calling convention newer than any TF runs.
    too_new = MATRIX[newest]["info"]["max_calling_convention"] + 1
    support = inspect_lib.tf_support(too_new, old_info["stablehlo_current"], (), matrix)
    assert support.oldest_tf is None and f"the module uses {too_new}" in support.reason
    # A module at the newest TF's StableHLO: the fix named for the TF before is target_tf, as
    # the guide recommends (issue 37: it named stablehlo_version='...').
    ordered = sorted(MATRIX, key=_version)
    newest_stablehlo = MATRIX[newest]["info"]["stablehlo_current"]
    support = inspect_lib.tf_support(old_info["max_calling_convention"], newest_stablehlo, (),
                                     matrix)
    assert support.oldest_tf == _oldest_tf_for(newest_stablehlo,
                                               old_info["max_calling_convention"])
    # The matrix's TF versions read different StableHLO versions: there is a TF before.
    assert support.oldest_tf != oldest, (support.oldest_tf, oldest)
    before = ordered[ordered.index(support.oldest_tf) - 1]
    assert (f"for TF {before}, export with --target-tf {before} (target_tf={before!r} in "
            f"save / convert)") in support.reason, support.reason
    assert "stablehlo_version=" not in support.reason

    lapack = inspect_lib.custom_call_report("lapack_sgeqrf_ffi", ("CPU",))
    assert lapack.allowed and not lapack.runs_in_tf and "No FFI handler" in lapack.note
    qr = inspect_lib.custom_call_report("Qr", ("CPU",))
    assert qr.allowed and qr.runs_in_tf and qr.tf_runnable_platforms == ("cpu",)
    unknown = inspect_lib.custom_call_report("my_kernel", ("CPU",))
    assert not unknown.allowed and not unknown.runs_in_tf and "allowlist" in unknown.note
    support = inspect_lib.tf_support(old_info["max_calling_convention"],
                                     old_info["stablehlo_current"], (lapack,), matrix)
    assert support.oldest_tf is None and "lapack_sgeqrf_ffi" in support.reason

    assert inspect_lib.custom_call_targets(
        'stablehlo.custom_call @Qr(%0) ... stablehlo.custom_call @"odd name"(%1) ... '
        '"vhlo.custom_call_v1"(%2) <{call_target_name = #vhlo.string_v1<"Eigh">}>'
    ) == ("Eigh", "Qr", "odd name")


def test_unreadable_directories_say_what_and_how(tmp_path):
    with pytest.raises(inspect_lib.SavedModelReadError, match="does not exist.*Fix"):
        inspect_lib.inspect_saved_model(tmp_path / "missing")
    (tmp_path / "variables").mkdir()
    with pytest.raises(inspect_lib.SavedModelReadError, match="no saved_model.pb.*Fix"):
        inspect_lib.inspect_saved_model(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"\xff\xff\xff garbage")
    with pytest.raises(inspect_lib.SavedModelReadError, match="corrupt.*Fix"):
        inspect_lib.inspect_saved_model(tmp_path)
    assert cli.main(["inspect", str(tmp_path / "missing")]) == EXIT_UNREADABLE


def test_readers_import_and_inspect_without_jax(cnn_model):
    """A JAX-blocked process: TF still imports, jax does not, and `inspect` runs (CLI, JSON)."""
    proc = run_without_jax(
        "import json, importlib\n"
        "import tensorflow as tf\n"
        "for name in ('jax', 'jaxlib', 'jax.numpy'):\n"
        "    try:\n"
        "        importlib.import_module(name); print('IMPORTED', name)\n"
        "    except ImportError:\n"
        "        pass\n"
        "from saved_model_tools import cli, inspect, verify, warmup, tflite, manifest\n"
        "code = cli.main(['inspect', sys.argv[1], '--json'])\n"
        "print('EXIT', code)\n"
        "print('JAX_LOADED', sorted(m for m in sys.modules if m.split('.')[0] in "
        "('jax', 'jaxlib')))\n",
        str(cnn_model))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IMPORTED" not in proc.stdout
    assert "EXIT 0" in proc.stdout and "JAX_LOADED []" in proc.stdout
    report = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    in_process = inspect_lib.inspect_saved_model(cnn_model)
    assert report["variable_bytes"] == in_process.variable_bytes
    assert [m["sha256"] for m in report["modules"]] == [m.sha256 for m in in_process.modules]
    assert report["tf_support"]["oldest_tf"] == in_process.tf_support.oldest_tf


def test_undeserializable_module_reports_tf_diagnostic(capfd):
    broken = b"ML\xefR\x0dStableHLO_v1.13.7\x00\x01\x02\x03 not a module"
    assert inspect_lib.stablehlo_producer(broken) == "StableHLO_v1.13.7"
    text, error = inspect_lib.module_text(broken)
    assert text is None and "deserialize" in error
    assert "error" not in capfd.readouterr().err  # MLIR's diagnostics went into `error`
    assert inspect_lib.stablehlo_producer(b"module @m {}") is None
    assert inspect_lib.module_text(b"module @m {}") == ("module @m {}", None)
