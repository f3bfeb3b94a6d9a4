"""`target_tf` rewrites what an older TF fails natively but runs rewritten (measured per TF by
tools/tf_version_matrix.py), refuses what it fails even rewritten, and the `target_tf` table keeps
a TF whose only failures are such refused features.

The measured case: TF 2.17's XLA rejects gathers/scatters with batching dimensions (jax.vmap of
indexing, and the LAPACK rewrite's pivoting with a batch); written for target_tf="2.17" they are
spelled out with explicit batch indices. Runs in the installed TF (2.21), which runs every older
target's modules too; tests/saved_model_tools/test_target_tf_217_serving.py runs them in TF 2.17.
"""
import copy
import json
import sys
from pathlib import Path

import jax
import jax.interpreters.mlir as jax_mlir
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from jax.extend import mlir as jax_extend_mlir

import jax2tf_native
from jax2tf_native.errors import TargetTfError
from tf_ops import gather_batching, tf_targets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import tf_version_matrix  # noqa: E402


def rows_at(x, j):
    """A batched gather and a batched scatter: each row reads and writes its own index."""
    return jax.vmap(lambda r, i: r.at[i].add(10 * r[(i + 1) % r.shape[0]]))(x, j)


def take_along(x, j):
    return jnp.take_along_axis(x, j[:, None], axis=1)[:, 0] * 2


def _inputs(batch=5):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 4)).astype(np.float32),
            rng.integers(0, 4, size=batch).astype(np.int32))


def _batched_gathers(texts):
    """Gathers/scatters with batching dimensions in module texts (dot_general's `batching_dims`
    is another thing, which every TF runs)."""
    return sum(t.count("operand_batching_dims") + t.count("input_batching_dims") for t in texts)


def _module_texts(f_tf, *specs):
    concrete = tf.function(f_tf, autograph=False).get_concrete_function(*specs)
    texts = []
    with jax_mlir.make_ir_context():
        for op in concrete.graph.get_operations():
            if op.type == "XlaCallModule":
                module = jax_extend_mlir.deserialize_portable_artifact(op.get_attr("module"))
                texts.append(str(module))
    assert texts
    return concrete, texts


def test_table_says_217_fails_batched_gathers_and_runs_them_rewritten():
    """The table the rewrite is chosen from: measured failing natively in 2.17 only."""
    statuses = {v: (tf_targets.probe_status(t, "batched_gather"),
                    tf_targets.probe_status(t, "batched_gather_rewritten"))
                for v, t in tf_targets.measured_targets().items()}
    assert statuses["2.17"] == ("error", "ok"), statuses
    for version in ("2.18", "2.19", "2.20", "2.21"):
        assert statuses[version][0] == "ok", statuses
    assert [f.probe for f in tf_targets.rewrites_for(tf_targets.resolve("2.17"))] == [
        "batched_gather"]
    assert tf_targets.rewrites_for(tf_targets.resolve("2.18")) == []
    assert tf_targets.oldest_running("batched_gather") == "2.17"  # rewritten there


@pytest.mark.parametrize("fn", [rows_at, take_along])
@pytest.mark.parametrize("poly", [None, ["(b, 4)", "(b,)"]])
def test_target_217_writes_no_batching_dims_and_equals_jax(fn, poly):
    x, j = _inputs()
    want = np.asarray(jax.jit(fn)(x, j))
    native = jax2tf_native.convert(fn, polymorphic_shapes=poly, target_tf="2.18")
    rewritten = jax2tf_native.convert(fn, polymorphic_shapes=poly, target_tf="2.17")
    specs = [tf.TensorSpec([None if poly else 5, 4], tf.float32),
             tf.TensorSpec([None if poly else 5], tf.int32)]
    _, native_texts = _module_texts(native, *specs)
    assert _batched_gathers(native_texts)  # what 2.18 runs as written
    concrete, texts = _module_texts(rewritten, *specs)
    assert not _batched_gathers(texts), texts
    np.testing.assert_array_equal(rewritten(x, j).numpy(), want)
    np.testing.assert_array_equal(native(x, j).numpy(), want)
    if poly:  # another batch size through the same symbolic-batch module
        x7, j7 = _inputs(7)
        np.testing.assert_array_equal(concrete(tf.constant(x7), tf.constant(j7)).numpy(),
                                      np.asarray(jax.jit(fn)(x7, j7)))


def test_rewrite_handles_explicit_index_vectors_and_narrow_indices():
    """gather_batching on a module with i8 indices and an explicit index vector dimension."""
    def fn(x, j):  # (b, 3, 4) indexed per batch at (b, 2) int8 index pairs
        return jax.vmap(lambda m, ij: m[ij[0], ij[1]])(x, j)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    j = np.array([[2, 3], [1, 0]], np.int8)
    exported = jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                              jax.ShapeDtypeStruct(j.shape, j.dtype))
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
        assert gather_batching.remove_batching_dims(module) == 1
        assert not _batched_gathers([str(module)])
        module.operation.verify()
    f_tf = jax2tf_native.convert(fn, target_tf="2.17")
    np.testing.assert_array_equal(f_tf(x, j).numpy(), [11.0, 16.0])
    np.testing.assert_array_equal(np.asarray(fn(x, j)), [11.0, 16.0])


def test_lapack_rewrite_with_a_symbolic_batch_runs_for_target_217():
    """The frozen cpu_lapack_poly_batch artifact (LAPACK getrf/potrf around a symbolic batch),
    called for TF 2.17: rewritten LAPACK, then batched gathers spelled out; equals the outputs
    JAX recorded."""
    from tools.backcompat import storage
    artifact = next(a for a in storage.read_all() if a.name == "cpu_lapack_poly_batch")
    f_tf = jax2tf_native.call_exported(artifact.serialized, target_tf="2.17",
                                       with_gradient=False)
    outs = f_tf(*[tf.constant(x) for x in artifact.inputs])
    assert len(outs) == len(artifact.expected) == 3
    for got, want in zip(outs, artifact.expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=artifact.rtol, atol=artifact.atol)
    spec = [tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in artifact.inputs]
    _, texts = _module_texts(f_tf, *spec)
    assert not _batched_gathers(texts)
    assert not any("custom_call @lapack_" in t for t in texts)
    assert any("@_lapack_portable" in t for t in texts)  # the rewritten LAPACK functions


def _table_with(monkeypatch, version, **statuses):
    table = copy.deepcopy(tf_targets._table())
    table["targets"][version]["probes"].update(statuses)
    monkeypatch.setattr(tf_targets, "_table", lambda: table)


def test_feature_that_fails_even_rewritten_is_refused_naming_it(monkeypatch):
    """Where the rewritten probe failed too, target_tf refuses the feature with our error (the
    table is edited here: the measured one has 2.17 running the rewritten form)."""
    _table_with(monkeypatch, "2.17", batched_gather_rewritten="error")
    assert tf_targets.oldest_running("batched_gather") == "2.18"
    x, j = _inputs()
    with pytest.raises(TargetTfError) as info:
        jax2tf_native.convert(rows_at, target_tf="2.17")(x, j)
    message = str(info.value)
    assert "gather/scatter with batching dimensions" in message, message
    assert "TF 2.17 cannot run" in message and "target_tf='2.18'" in message, message
    assert "test_target_tf_rewrites.py" in message, message  # the user's source line
    # Without the feature the same target works, and the result equals JAX.
    def plain(v, k):
        return v * 2 + k[:, None]
    f_tf = jax2tf_native.convert(plain, target_tf="2.17")
    np.testing.assert_array_equal(f_tf(x, j).numpy(), np.asarray(jax.jit(plain)(x, j)))


def test_targets_table_keeps_a_tf_whose_failures_are_refused_features():
    matrix = json.loads(tf_version_matrix.MATRIX_JSON.read_text())
    form = tf_version_matrix.target_form(matrix, "2.17")
    assert matrix["artifact_features"]["cpu_lapack_poly_batch"] == ["batched_gather"]
    failed = copy.deepcopy(matrix)
    failed["tf"]["2.17"]["results"]["cpu_lapack_poly_batch"][form]["status"] = "error"
    # The rewrite fixes batched gathers in 2.17: this failure is not explained, so 2.17 goes.
    assert "2.17" not in tf_version_matrix.targets_table(failed)["targets"]
    # Had the rewritten probe failed too, target_tf would refuse the feature: 2.17 stays.
    failed["tf"]["2.17"]["results"]["probe_batched_gather_rewritten"]["probe"]["status"] = "error"
    target = tf_version_matrix.targets_table(failed)["targets"]["2.17"]
    assert target["refused"] == {"cpu_lapack_poly_batch": ["batched_gather"]}
    assert target["rewrites"] == []
    runnable = len(matrix["artifacts"]) - len(matrix["expected_tf_failures"])
    assert target["verified"] == (f"{runnable - 1}/{runnable} artifacts ran as `{form}`; 1 "
                                  f"other holds features target_tf refuses for this TF")
    measured = tf_version_matrix.targets_table(matrix)["targets"]["2.17"]
    assert measured["refused"] == {} and measured["rewrites"] == ["batched_gather"]
