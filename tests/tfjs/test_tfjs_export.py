"""Our TF.js export (saved_model_tools.tfjs / write.tfjs_model / `jax2tf-native tfjs`), run by the
real runtimes: @tensorflow/tfjs in Node at two batch sizes, and headless Chromium, against JAX.
"""
from __future__ import annotations

import json
import subprocess
import sys

import jax
import numpy as np
import pytest

import saved_model_tools
from jax2tf_native import example_model
from saved_model_tools import tfjs
from tools import tfjs_runtimes

RTOL, ATOL = 1e-4, 1e-5


def test_private_freeze_entry_points_are_where_we_use_them():
    """tf_ops/graph_passes.py uses private TF (freezing, Grappler); an upgrade that moves them
    fails here by name."""
    from tensorflow.python.framework import convert_to_constants
    from tensorflow.python.grappler import cluster, tf_optimizer
    assert callable(convert_to_constants.convert_variables_to_constants_v2)
    assert callable(tf_optimizer.OptimizeGraph) and callable(cluster.Cluster)


@pytest.fixture(scope="module")
def example_cnn_js(tmp_path_factory):
    out = tmp_path_factory.mktemp("tfjs") / "cnn"
    params = example_model.init_params()
    report = saved_model_tools.save_tfjs(out, example_model.apply, params,
                                         [example_model.example_images(2)],
                                         polymorphic_shapes=[example_model.POLYMORPHIC_SHAPE])
    return out, params, report


def test_example_cnn_model_json_and_none_batch(example_cnn_js):
    out, _, report = example_cnn_js
    model = json.loads((out / "model.json").read_text())
    assert model["format"] == "graph-model"
    assert report.inputs == {"input_0": ("float32", [None, 28, 28, 1])}
    names = {w["name"] for g in model["weightsManifest"] for w in g["weights"]}
    assert {n["name"] for n in model["modelTopology"]["node"] if n["op"] == "Const"} <= names
    assert not any(op.startswith("Xla") or op in ("Assert", "StringFormat")
                   for op in report.op_types)
    assert set(report.op_types) <= tfjs.supported_ops()[1]


def test_example_cnn_in_node_at_two_batch_sizes(example_cnn_js):
    out, params, _ = example_cnn_js
    for batch in (1, 7):
        images = example_model.example_images(batch, seed=batch)
        (got,), _ = tfjs_runtimes.run_in_node(out, {"input_0": images})
        want = np.asarray(jax.jit(example_model.apply)(params, images))
        assert got.shape == (batch, example_model.NUM_CLASSES)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_example_cnn_in_headless_chromium(example_cnn_js):
    out, params, _ = example_cnn_js
    calls = [{"input_0": example_model.example_images(b, seed=10 + b)} for b in (1, 3)]
    results, page = tfjs_runtimes.run_in_chromium(out, calls)
    print("chromium page:", page)
    for call, (got,) in zip(calls, results):
        want = np.asarray(jax.jit(example_model.apply)(params, call["input_0"]))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_flax_linen_model_in_node(tmp_path):
    from flax import linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.LayerNorm()(nn.Dense(16)(x))
            h = nn.gelu(h, approximate=False)
            return nn.softmax(nn.Dense(4)(h) + jax.numpy.cumsum(h[:, :4], axis=1))

    model = Block()
    x = np.random.RandomState(0).randn(3, 6).astype(np.float32)
    variables = model.init(jax.random.PRNGKey(0), x)
    report = saved_model_tools.save_model_tfjs(tmp_path / "js", model, [x], variables=variables,
                                               polymorphic_shapes=["(b, 6)"])
    (name,) = report.inputs
    for batch in (2, 5):
        xb = np.random.RandomState(batch).randn(batch, 6).astype(np.float32)
        (got,), _ = tfjs_runtimes.run_in_node(tmp_path / "js", {name: xb})
        np.testing.assert_allclose(got, np.asarray(model.apply(variables, xb)),
                                   rtol=RTOL, atol=ATOL)


def test_while_loop_and_int32_ids_in_node(tmp_path):
    """A fori_loop becomes StatelessWhile with library functions (their Consts become weights
    named `function/const`), run with executeAsync; int32 token ids gather an embedding."""
    def loop(w, x):
        return jax.lax.fori_loop(0, 3, lambda i, h: jax.numpy.tanh(h @ w) + 0.5 * i, x)

    w = np.random.RandomState(0).randn(4, 4).astype(np.float32) / 2
    report = saved_model_tools.save_tfjs(tmp_path / "loop", loop, w, [np.ones((2, 4), np.float32)],
                                         polymorphic_shapes=["(b, 4)"])
    assert report.needs_execute_async and "StatelessWhile" in report.op_types
    model = json.loads((tmp_path / "loop" / "model.json").read_text())
    functions = [f["signature"]["name"] for f in model["modelTopology"]["library"]["function"]]
    weights = [w["name"] for g in model["weightsManifest"] for w in g["weights"]]
    assert any(name.split("/")[0] in functions for name in weights)
    for batch in (1, 3):
        x = np.random.RandomState(batch).randn(batch, 4).astype(np.float32)
        (got,), _ = tfjs_runtimes.run_in_node(tmp_path / "loop", {"input_0": x})
        np.testing.assert_allclose(got, np.asarray(jax.jit(loop)(w, x)), rtol=RTOL, atol=ATOL)

    def embed(table, ids):
        return jax.numpy.take(table, ids, axis=0).sum(axis=1)

    table = np.random.RandomState(1).randn(10, 3).astype(np.float32)
    saved_model_tools.save_tfjs(tmp_path / "embed", embed, table, [np.zeros((2, 5), np.int32)],
                                polymorphic_shapes=["(b, 5)"])
    ids = np.random.RandomState(2).randint(0, 10, (3, 5)).astype(np.int32)
    (got,), _ = tfjs_runtimes.run_in_node(tmp_path / "embed", {"input_0": ids})
    np.testing.assert_allclose(got, np.asarray(embed(table, ids)), rtol=RTOL, atol=ATOL)


def test_xla_saved_model_is_refused_naming_the_op_and_the_fix(tmp_path):
    """Issue 37: the cause was third of 8 problems on one line, after Assert and
    StatefulPartitionedCall (which come with the XlaCallModule op); now it is the one said."""
    saved_model_tools.save(tmp_path / "sm", lambda w, x: x @ w, np.ones((3, 2), np.float32),
                           [np.ones((1, 3), np.float32)])
    with pytest.raises(tfjs.TfjsExportError) as info:
        tfjs.convert_to_tfjs(tmp_path / "sm", tmp_path / "js")
    assert str(info.value) == (
        f"{tmp_path / 'sm'} signature 'serving_default' cannot run in TF.js: it was saved with "
        f"XLA (XlaCallModule ops), which TF.js cannot run; nothing was written. Fix: export it "
        f"with --no-xla (enable_xla=False: plain TF ops) and convert that model.")
    assert not (tmp_path / "js").exists()
    # The command as a user runs it: that one cause on one line, exit 4, nothing written.
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "tfjs", str(tmp_path / "sm"),
                           "--out", str(tmp_path / "js")], capture_output=True, text=True)
    lines = [l for l in proc.stderr.splitlines() if "oneDNN" not in l and "absl" not in l]
    assert (proc.returncode, lines) == (4, [f"jax2tf-native tfjs: error: {info.value}"]), (
        proc.returncode, proc.stderr[-2000:])
    assert not (tmp_path / "js").exists()


def test_float64_input_is_refused_naming_the_input(tmp_path):
    saved_model_tools.save(tmp_path / "sm", lambda w, x: x * w, np.float32(2),
                           [np.ones((2,), np.float64)], enable_xla=False)
    with pytest.raises(tfjs.TfjsExportError, match="input 'input_0' is float64.*cast"):
        tfjs.convert_to_tfjs(tmp_path / "sm", tmp_path / "js")
    assert not (tmp_path / "js").exists()


def _shift(s, x):
    return jax.numpy.left_shift(x, s)


def _line(fn) -> str:
    return f"test_tfjs_export.py:{fn.__code__.co_firstlineno + 1}"


def test_op_tfjs_lacks_is_named_at_export(tmp_path):
    """TF.js 4.22 has no LeftShift kernel; the plain graph of jnp.left_shift has one. Issue 37:
    the error names the user's line, and the function rather than a temporary directory."""
    with pytest.raises(tfjs.TfjsExportError) as info:
        saved_model_tools.save_tfjs(tmp_path / "js", _shift, np.int32(2),
                                    [np.arange(4, dtype=np.int32)])
    message = str(info.value)
    assert message.startswith("the function _shift (as plain TF ops) signature "
                              "'serving_default' cannot run in TF.js (1 problem(s)); nothing was "
                              "written:\n  - op 'LeftShift' (from "
                              f"{_line(_shift)} in the JAX code) is not in TF.js 4.22.0's "
                              f"supported ops"), message
    assert "jax2tf_tfjs_" not in message and "/tmp" not in message
    assert not (tmp_path / "js").exists()


def test_cli_lists_each_problem_on_its_own_line_with_the_jax_line(tmp_path):
    """`jax2tf-native tfjs` as a user runs it on a --no-xla model TF.js cannot run: exit 4,
    the error line, then one line per problem, each op with the line of JAX code it came from."""
    saved_model_tools.save(tmp_path / "sm", _shift, np.int32(2),
                           [np.arange(4, dtype=np.int32)], enable_xla=False)
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "tfjs", str(tmp_path / "sm"),
                           "--out", str(tmp_path / "js")], capture_output=True, text=True)
    lines = [l for l in proc.stderr.splitlines() if "oneDNN" not in l and "absl" not in l]
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert lines[0].startswith(f"jax2tf-native tfjs: error: {tmp_path / 'sm'} signature "
                               f"'serving_default' cannot run in TF.js ("), lines
    problems = [l for l in lines[1:] if l.startswith("  - ")]
    assert len(problems) == int(lines[0].split("(")[1].split(" ")[0]) >= 1, lines
    assert any(l.startswith(f"  - op 'LeftShift' (from {_line(_shift)} in the JAX code) is not "
                            f"in TF.js 4.22.0's supported ops") for l in problems), problems
    assert not (tmp_path / "js").exists()


def test_cli_converts_a_plain_saved_model(tmp_path, example_cnn_js):
    saved_model_tools.save(tmp_path / "sm", lambda w, x: jax.nn.relu(x @ w),
                           np.arange(6, dtype=np.float32).reshape(3, 2) - 2,
                           [np.ones((1, 3), np.float32)], polymorphic_shapes=["(b, 3)"],
                           enable_xla=False)
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "tfjs", str(tmp_path / "sm"),
                           "--out", str(tmp_path / "js")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "input input_0: float32['?', 3]" in proc.stdout
    x = np.array([[1, -2, 3], [0.5, 0, 4]], np.float32)
    (got,), _ = tfjs_runtimes.run_in_node(tmp_path / "js", {"input_0": x})
    np.testing.assert_allclose(got, np.maximum(x @ (np.arange(6).reshape(3, 2) - 2), 0),
                               rtol=RTOL, atol=ATOL)


def test_existing_output_is_refused_before_saving(tmp_path):
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        saved_model_tools.save_tfjs(tmp_path / "js", lambda w, x: x * w, np.float32(2),
                                    [np.ones((2,), np.float32)])
    assert [p.name for p in (tmp_path / "js").iterdir()] == ["keep.txt"]
