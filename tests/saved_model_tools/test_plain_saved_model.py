"""SavedModels written with `enable_xla=False` (CLI `export --no-xla`, `save_exported`): plain
TF ops only, verified without JAX, served with XLA's JIT off, and reported as such by `inspect`
(issue 27, points 3 and 4)."""
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import saved_model_tools
from saved_model_tools import cli, manifest
from saved_model_tools.inspect import inspect_saved_model
from tests.saved_model_tools.conftest import BLOCK_JAX, PROJECT_ROOT

USER_MODULE = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    def predict(params, features):
        hidden = jnp.tanh(features @ params["dense"]["w"] + params["dense"]["b"])
        return {"probs": jax.nn.softmax(hidden, axis=-1)}
""")
XLA_PREFIXES = ("Xla", "_Xla", "_xla")


def predict(params, features):
    hidden = jnp.tanh(features @ params["dense"]["w"] + params["dense"]["b"])
    return {"probs": jax.nn.softmax(hidden, axis=-1)}


def saved_op_set(directory) -> tuple[set[str], set[str]]:
    """Every op type in saved_model.pb's graph and function library (gradient functions
    included), and every node or function attribute asking for XLA, read from the proto."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel.FromString((directory / "saved_model.pb").read_bytes())
    types, attrs = set(), set()
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        nodes = list(graph.node)
        for function in graph.library.function:
            nodes.extend(function.node_def)
            attrs |= {k for k, v in function.attr.items()
                      if k.startswith(XLA_PREFIXES) and (v.WhichOneof("value") != "b" or v.b)}
        types |= {n.op for n in nodes}
        attrs |= {k for n in nodes for k, v in n.attr.items()
                  if k.startswith(XLA_PREFIXES) and (v.WhichOneof("value") != "b" or v.b)}
    return types, attrs


# Runs the saved model with XLA's JIT off (and auto-clustering disabled by flag) where JAX
# cannot be imported; writes the outputs and the tape gradients w.r.t. the Variables.
SERVE_WITHOUT_XLA = BLOCK_JAX + textwrap.dedent("""
    import json, os, sys
    os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=-1"
    import numpy as np
    import tensorflow as tf
    tf.config.optimizer.set_jit(False)
    model = tf.saved_model.load(sys.argv[1])
    features = tf.constant(np.load(sys.argv[2]))
    serve = model.signatures["serving_default"]
    with tf.GradientTape() as tape:
        probs = serve(features=features)["probs"]
        loss = tf.reduce_sum(probs * tf.range(4, dtype=tf.float32))
    grads = tape.gradient(loss, model.trainable_variables)
    np.savez(sys.argv[3], probs=probs.numpy(),
             **{v.name.split(":")[0]: g.numpy() for v, g in zip(model.trainable_variables, grads)})
    print(json.dumps({"jit": bool(tf.config.optimizer.get_jit()),
                      "jax": [m for m in sys.modules if m.split(".")[0] == "jax"]}))
""")


def test_cli_no_xla_model_verifies_inspects_and_serves_with_jit_off(tmp_path, monkeypatch,
                                                                       capsys):
    (tmp_path / "user_model.py").write_text(USER_MODULE)
    rng = np.random.default_rng(0)
    params = {"dense": {"w": rng.standard_normal((3, 4)).astype(np.float32),
                        "b": rng.standard_normal((4,)).astype(np.float32)}}
    np.savez(tmp_path / "params.npz", **{"dense/w": params["dense"]["w"],
                                          "dense/b": params["dense"]["b"]})
    monkeypatch.chdir(tmp_path)
    try:
        code = cli.main(["export", "user_model:predict", "--params", "params.npz",
                         "--input", "features:float32[b,3]", "--out", "out/1", "--no-xla"])
    finally:
        sys.modules.pop("user_model", None)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verify without JAX: passed" in out  # run in a child where JAX cannot import
    directory = tmp_path / "out" / "1"
    record = manifest.read(directory)
    assert record.lowering == "plain"
    # Where each TF op type came from in the user's code, for tfjs / tflite refusals (issue 37).
    assert record.plain_op_sources["Tanh"] == ("user_model.py:6",), record.plain_op_sources
    assert "user_model.py:7" in record.plain_op_sources["Exp"], record.plain_op_sources

    types, attrs = saved_op_set(directory)
    assert not [t for t in types if t.startswith(XLA_PREFIXES)], sorted(types)
    assert not attrs, sorted(attrs)
    assert {"MatMul", "Tanh", "Exp"} <= types or {"BatchMatMulV2", "Tanh", "Exp"} <= types
    report = inspect_saved_model(directory)
    assert (report.lowering, report.xla_call_module_ops, report.xla_op_types) == (
        "plain TF ops", 0, ())
    assert set(report.op_types) == types
    assert cli.main(["inspect", str(directory)]) == 0
    assert "Lowering: plain TF ops" in capsys.readouterr().out

    features = rng.standard_normal((5, 3)).astype(np.float32)
    np.save(tmp_path / "features.npy", features)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    child = subprocess.run(
        [sys.executable, "-I", "-c", SERVE_WITHOUT_XLA, str(directory),
         str(tmp_path / "features.npy"), str(tmp_path / "served.npz")],
        capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {"jit": False, "jax": []}
    served = np.load(tmp_path / "served.npz")
    np.testing.assert_allclose(served["probs"], predict(params, features)["probs"], rtol=1e-5)
    loss = lambda p: jnp.sum(predict(p, features)["probs"] * jnp.arange(4.0))
    want = jax.grad(loss)(params)
    np.testing.assert_allclose(served["params/dense/w"], want["dense"]["w"], rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(served["params/dense/b"], want["dense"]["b"], rtol=1e-4,
                               atol=1e-6)


def test_save_exported_plain(tmp_path):
    params = {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)}
    x_spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("(b, 3)"), np.float32)
    blob = jax.export.export(jax.jit(lambda p, x: jnp.tanh(x @ p["w"])))(
        params, x_spec).serialize(vjp_order=1)
    record = saved_model_tools.save_exported(tmp_path / "m", blob, params=params,
                                             input_names=["x"], enable_xla=False)
    assert record.lowering == "plain"
    types, attrs = saved_op_set(tmp_path / "m")
    assert not [t for t in types if t.startswith(XLA_PREFIXES)] and not attrs
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    got = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"](x=x)
    np.testing.assert_allclose(got["output_0"].numpy(), np.tanh(x @ params["w"]), rtol=1e-5)


def _lapack_lu(params, x):
    return jax.scipy.linalg.lu_factor(x)[0] * params


def test_failed_plain_save_writes_nothing(tmp_path):
    directory = tmp_path / "models" / "1"
    # JAX's own LAPACK lowering (linalg="native") of LU is a custom call TF has no exact
    # kernel for (its Lu raises on a singular matrix): refused, by name.
    with pytest.raises(NotImplementedError, match=r"`stablehlo.custom_call`.*'lapack_sgetrf"):
        saved_model_tools.save(directory, _lapack_lu, np.float32(2),
                               [np.eye(3, dtype=np.float32)], enable_xla=False,
                               linalg="native")
    # Neither the model nor a temporary sibling is left behind.
    assert not directory.parent.exists() or list(directory.parent.iterdir()) == []
    with pytest.raises(ValueError, match="jit_compile=True.*enable_xla=False"):
        saved_model_tools.save(directory, predict, {}, [np.ones((2, 3), np.float32)],
                               enable_xla=False, jit_compile=True)
    assert not directory.exists()
