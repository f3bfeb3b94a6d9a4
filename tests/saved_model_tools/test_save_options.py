"""`save` takes what `convert` takes: every dtype, pytree inputs, constraints, StableHLO
version, linalg, and a trainable choice per parameter subtree."""
import json

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
import saved_model_tools
from saved_model_tools import inspect as inspect_lib
from saved_model_tools import manifest, verify, warmup
from saved_model_tools.write import references
from tests.saved_model_tools.conftest import run_without_jax

_DTYPE_INPUTS = {
    "x_bf16": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16),
    "x_f16": np.linspace(-1, 1, 6, dtype=np.float16).reshape(2, 3),
    "x_i8": np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
    "x_bool": np.array([[True, False, True], [False, True, True]]),
    "x_c64": (np.arange(6) + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(2, 3),
}


def _every_dtype(params, x_bf16, x_f16, x_i8, x_bool, x_c64):
    return {"y_bf16": jnp.tanh(x_bf16 * params["w_bf16"]),
            "y_f16": x_f16 * params["w_f16"],
            "y_i8": x_i8 * 2,
            "y_bool": jnp.logical_not(x_bool),
            "y_c64": x_c64 * params["w_c64"]}


_DTYPE_PARAMS = {"w_bf16": np.full((3,), 1.5, ml_dtypes.bfloat16),
                 "w_f16": np.full((3,), 0.5, np.float16),
                 "w_c64": np.full((3,), 1 - 1j, np.complex64)}


@pytest.fixture(scope="module")
def dtype_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("dtypes") / "m"
    saved_model_tools.save(path, _every_dtype, _DTYPE_PARAMS, list(_DTYPE_INPUTS.values()),
                           polymorphic_shapes="(b, 3)", input_names=list(_DTYPE_INPUTS))
    return path


def test_every_dtype_saves_and_serves_jax_values(dtype_model):
    serve = tf.saved_model.load(str(dtype_model)).signatures["serving_default"]
    got = serve(**{k: tf.constant(v) for k, v in _DTYPE_INPUTS.items()})
    want = _every_dtype(_DTYPE_PARAMS, *_DTYPE_INPUTS.values())
    for name, value in want.items():
        assert got[name].numpy().dtype == np.asarray(value).dtype, name
        np.testing.assert_array_equal(got[name].numpy(), np.asarray(value), err_msg=name)


def test_references_keep_every_dtype(dtype_model):
    record = manifest.read(dtype_model).signature("serving_default")
    assert {t.name: t.dtype for t in record.outputs} == {
        "y_bf16": "bfloat16", "y_f16": "float16", "y_i8": "int8", "y_bool": "bool",
        "y_c64": "complex64"}
    inputs, outputs = references.read(dtype_model, record.references[0])
    assert inputs["x_bf16"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert outputs["y_bf16"].dtype == np.dtype(ml_dtypes.bfloat16)
    want = _every_dtype(_DTYPE_PARAMS, *[references.resize_batch(v, record.references[0]
                                                                 .batch_size)
                                         for v in _DTYPE_INPUTS.values()])
    np.testing.assert_array_equal(outputs["y_bf16"], np.asarray(want["y_bf16"]))


def test_every_dtype_warms_up_verifies_and_inspects_without_jax(dtype_model):
    requests = warmup.read_warmup_requests(dtype_model / manifest.WARMUP_FILE)
    assert requests[0][1]["x_bf16"].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(requests[-1][1]["x_c64"], _DTYPE_INPUTS["x_c64"])
    report = verify.verify(dtype_model)
    assert report.ok, report.format()
    checked = {c.output for c in report.checks if c.expected == "jax reference" and c.passed}
    assert checked == {"y_bf16", "y_f16", "y_i8", "y_bool", "y_c64"}
    warmed = [c for c in report.checks if c.path == "warmup"]
    assert len(warmed) == len(requests) * 5 and all(c.passed for c in warmed)
    proc = run_without_jax(
        "import json, sys\n"
        "from saved_model_tools import inspect\n"
        "r = inspect.inspect_saved_model(sys.argv[1])\n"
        "print(json.dumps({t.name: t.dtype for t in r.signatures[0].inputs}))\n",
        str(dtype_model))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "x_bf16": "bfloat16", "x_f16": "float16", "x_i8": "int8", "x_bool": "bool",
        "x_c64": "complex64"}


def _token_model(params, inputs):
    """A learned position embedding sliced by the sequence length: needs t <= 64."""
    t = inputs["token_ids"].shape[1]
    hidden = params["embed"][inputs["token_ids"]] + params["pos_emb"][None, :t]
    return {"hidden": hidden * inputs["padding_mask"][..., None]}


def _token_inputs(b, t, seed=0):
    rng = np.random.default_rng(seed)
    return {"token_ids": rng.integers(0, 10, (b, t)).astype(np.int32),
            "padding_mask": rng.random((b, t)) < 0.8}


_TOKEN_PARAMS = {"embed": np.random.default_rng(1).standard_normal((10, 8)).astype(np.float32),
                 "pos_emb": np.random.default_rng(2).standard_normal((64, 8)).astype(np.float32)}


def test_dict_inputs_named_by_key_path_with_constraints(tmp_path):
    with pytest.raises(Exception, match="broadcast|t <= 64|min"):  # what the issue reported
        saved_model_tools.save(tmp_path / "plain", _token_model, _TOKEN_PARAMS,
                               [_token_inputs(2, 5)], polymorphic_shapes=["(b, t)"])
    assert not (tmp_path / "plain").exists()
    record = saved_model_tools.save(tmp_path / "m", _token_model, _TOKEN_PARAMS,
                                    [_token_inputs(2, 5)], polymorphic_shapes=["(b, t)"],
                                    polymorphic_constraints=["t <= 64"])
    assert [t.name for t in record.signature("serving_default").inputs] == [
        "padding_mask", "token_ids"]
    serve = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    for b, t in ((1, 3), (4, 64)):
        inputs = _token_inputs(b, t, seed=t)
        got = serve(**{k: tf.constant(v) for k, v in inputs.items()})["hidden"].numpy()
        np.testing.assert_allclose(got, _token_model(_TOKEN_PARAMS, inputs)["hidden"],
                                   rtol=1e-6)
    assert verify.verify(tmp_path / "m").ok


def test_input_names_prefix_pytree_leaves_and_save_exported_takes_pytrees(tmp_path):
    record = saved_model_tools.save(
        tmp_path / "m", lambda p, x, batch: x * batch["a"] + batch["b"][0], {},
        [np.ones((2, 3), np.float32),
         {"a": np.full((2, 3), 2, np.float32), "b": [np.ones((2, 3), np.float32)]}],
        polymorphic_shapes=["(n, 3)", {"a": "(n, 3)", "b": ["(n, 3)"]}],
        input_names=["x", "batch"])
    assert [t.name for t in record.signature("serving_default").inputs] == [
        "x", "batch_a", "batch_b_0"]
    assert [t.shape for t in record.signature("serving_default").inputs] == [(None, 3)] * 3

    def model(params, inputs):
        return jnp.tanh(inputs["token_ids"].astype(jnp.float32) @ params["w"])

    params = {"w": np.ones((4, 2), np.float32)}
    spec = {"token_ids": jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 4"), jnp.int32)}
    blob = jax.export.export(jax.jit(model))(params, spec).serialize(vjp_order=1)
    record = saved_model_tools.save_exported(tmp_path / "e", blob, params=params,
                                             trainable=False, stablehlo_version="1.0.0")
    assert record.stablehlo_version == "1.0.0"
    assert [v.name for v in tf.saved_model.load(str(tmp_path / "e")).non_trainable_variables
            ] == ["params/w:0"]
    (info,) = record.signature("serving_default").inputs
    assert (info.name, info.shape) == ("token_ids", (None, 4))
    serve = tf.saved_model.load(str(tmp_path / "e")).signatures["serving_default"]
    ids = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_allclose(serve(token_ids=tf.constant(ids))["output_0"].numpy(),
                               model(params, {"token_ids": ids}), rtol=1e-6)


def test_stablehlo_version_and_linalg_reach_the_modules(tmp_path):
    def solve(params, a):
        spd = a @ jnp.swapaxes(a, -1, -2) + 3 * jnp.eye(3)
        return jnp.linalg.solve(spd, params["rhs"])

    params = {"rhs": np.ones((3, 1), np.float32)}
    a = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    with pytest.raises(jax2tf_native.CustomCallNotAllowedError, match="lapack"):
        saved_model_tools.save(tmp_path / "native", solve, params, [a], linalg="native")
    assert not (tmp_path / "native").exists()
    record = saved_model_tools.save(tmp_path / "m", solve, params, [a],
                                    stablehlo_version="1.0.0")
    assert record.stablehlo_version == "1.0.0"
    report = inspect_lib.inspect_saved_model(tmp_path / "m")
    assert {m.stablehlo_version for m in report.modules} == {"1.0.0"}
    serve = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    np.testing.assert_allclose(serve(input_0=tf.constant(a))["output_0"].numpy(),
                               solve(params, a), rtol=1e-5)


def test_trainable_choice_per_subtree(tmp_path):
    params = {"params": {"w": np.ones((3, 2), np.float32)},
              "batch_stats": {"mean": np.zeros((2,), np.float32)},
              "step": np.zeros((), np.int32)}

    def model(variables, x):
        return (x @ variables["params"]["w"]) - variables["batch_stats"]["mean"]

    with pytest.raises(ValueError, match=r"trainable\['parameters'\] names no subtree"):
        saved_model_tools.save(tmp_path / "bad", model, params, [np.ones((2, 3), np.float32)],
                               trainable={"parameters": True})
    saved_model_tools.save(tmp_path / "m", model, params, [np.ones((2, 3), np.float32)],
                           polymorphic_shapes=["(b, 3)"],
                           trainable={"params": True, "batch_stats": False})
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    assert [v.name for v in loaded.trainable_variables] == ["params/params/w:0"]
    assert sorted(v.name for v in loaded.non_trainable_variables) == [
        "params/batch_stats/mean:0", "params/step:0"]
    x = tf.constant(np.ones((2, 3), np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(loaded.signatures["serving_default"](input_0=x)["output_0"] ** 2)
    grad = tape.gradient(loss, loaded.trainable_variables[0])
    want = jax.grad(lambda w: jnp.sum(model({**params, "params": {"w": w}}, np.ones((2, 3),
                                                                                np.float32)) ** 2))
    np.testing.assert_allclose(grad.numpy(), want(params["params"]["w"]), rtol=1e-6)


def test_further_signature_on_pytree_main_arguments_gets_the_pytree(tmp_path):
    inputs = _token_inputs(2, 5)
    saved_model_tools.save(
        tmp_path / "m", _token_model, _TOKEN_PARAMS, [inputs], polymorphic_shapes=["(b, t)"],
        polymorphic_constraints=["t <= 64"],
        signatures=[saved_model_tools.Signature(
            "mean_hidden", fn=lambda p, x: {"mean": _token_model(p, x)["hidden"].mean(1)})])
    serve = tf.saved_model.load(str(tmp_path / "m")).signatures["mean_hidden"]
    got = serve(**{k: tf.constant(v) for k, v in inputs.items()})["mean"].numpy()
    np.testing.assert_allclose(got, _token_model(_TOKEN_PARAMS, inputs)["hidden"].mean(1),
                               rtol=1e-6)
