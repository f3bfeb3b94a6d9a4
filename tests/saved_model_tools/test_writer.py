"""saved_model_tools.save / save_exported: Variables, signatures, gradients, atomic writes."""
import collections
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import saved_model_tools
from jax2tf_native import example_model
from saved_model_tools import manifest
from saved_model_tools.write import references
from tools import child_runner

POLY = ["(b, 28, 28, 1)"]


def _params():
    return example_model.init_params(0)


def _save(path, **kwargs):
    kwargs.setdefault("input_names", ["images"])
    return saved_model_tools.save(path, example_model.apply, _params(),
                                  [example_model.example_images(4)], polymorphic_shapes=POLY,
                                  **kwargs)


def _modules_by_function(path):
    """{function name: [sha1 of each XlaCallModule's module]} from saved_model.pb."""
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    found = collections.defaultdict(list)
    for fn in proto.meta_graphs[0].graph_def.library.function:
        for node in fn.node_def:
            if node.op == "XlaCallModule":
                found[fn.signature.name].append(hashlib.sha1(node.attr["module"].s).hexdigest())
    return found


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "cnn" / "1"
    lines = []
    record = _save(path, output_names=["logits"], progress=lines.append, signatures=[
        saved_model_tools.Signature(
            "classify_uint8",
            preprocess=lambda images: (tf.cast(images, tf.float32) / 255.0,),
            input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.uint8, "raw_images")],
            postprocess=lambda logits: {"label": tf.argmax(logits, -1),
                                        "probabilities": tf.nn.softmax(logits)}),
        saved_model_tools.Signature(
            "embed", fn=lambda p, x: {"hidden": jax.nn.relu(
                x.reshape(x.shape[0], -1)[:, :64] @ p["dense2_w"])}),
    ])
    return path, record, lines


def test_serving_default_named_polymorphic_and_matches_jax(saved):
    path, record, lines = saved
    assert [l.split(":")[0] for l in lines] == [f"[{i}/5] " + p for i, p in enumerate(
        ["trace and export every signature (JAX -> StableHLO -> XlaCallModule)",
         "trace JAX reference outputs (compiled and run during the write)",
         "write the SavedModel",
         "record references and warmup requests", f"commit atomically to {path}"], 1)]
    loaded = tf.saved_model.load(str(path))
    serve = loaded.signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["images"]
    assert serve.structured_input_signature[1]["images"].shape.as_list() == [None, 28, 28, 1]
    for batch in (1, 5):
        images = example_model.example_images(batch, seed=batch)
        got = serve(images=tf.constant(images))
        assert list(got) == ["logits"]
        np.testing.assert_allclose(got["logits"].numpy(),
                                   example_model.apply(_params(), images), rtol=1e-5, atol=1e-5)
    assert record.signature("serving_default").inputs[0].polymorphic_shape == POLY[0]


def test_variables_are_named_by_path_and_not_constants(saved):
    path, record, _ = saved
    loaded = tf.saved_model.load(str(path))
    names = sorted(v.name for v in loaded.variables)
    assert names == sorted(f"params/{k}:0" for k in _params())
    assert len(loaded.trainable_variables) == len(names) == record.variable_count
    assert record.variable_bytes == sum(np.asarray(v).nbytes for v in _params().values())
    # The graph holds no parameter values: it is smaller than the parameters themselves.
    assert (path / "saved_model.pb").stat().st_size < record.variable_bytes / 2


def test_extra_signatures_share_variables_and_preprocess(saved):
    path, _, _ = saved
    loaded = tf.saved_model.load(str(path))
    raw = np.random.default_rng(0).integers(0, 256, (3, 28, 28, 1)).astype(np.uint8)
    got = loaded.signatures["classify_uint8"](raw_images=tf.constant(raw))
    logits = example_model.apply(_params(), raw.astype(np.float32) / 255.0)
    np.testing.assert_array_equal(got["label"].numpy(), np.argmax(logits, -1))
    np.testing.assert_allclose(got["probabilities"].numpy(), jax.nn.softmax(logits), rtol=1e-5,
                               atol=1e-6)
    # Shared Variables: changing one changes what every signature computes.
    w = next(v for v in loaded.variables if v.name == "params/dense2_w:0")
    x = example_model.example_images(2)
    before = loaded.signatures["embed"](images=tf.constant(x))["hidden"].numpy()
    w.assign(w * 2.0)
    after = loaded.signatures["embed"](images=tf.constant(x))["hidden"].numpy()
    np.testing.assert_allclose(after, 2.0 * before, rtol=1e-5, atol=1e-6)
    logits_after = loaded.signatures["serving_default"](images=tf.constant(x))["logits"].numpy()
    params = dict(_params(), dense2_w=_params()["dense2_w"] * 2.0)
    np.testing.assert_allclose(logits_after, example_model.apply(params, x), rtol=1e-5,
                               atol=1e-5)


def test_each_module_is_stored_once_per_signature(saved):
    path, _, _ = saved
    modules = _modules_by_function(path)
    # Per signature: one function with its forward module, one gradient function with its
    # backward module; no function holds two copies. (serving_default and classify_uint8 run
    # the same JAX function, so their modules are byte-identical: one copy per signature.)
    assert all(len(hashes) == 1 for hashes in modules.values()), modules
    for name in ("serving_default", "classify_uint8", "embed"):
        assert len([f for f in modules if f.startswith(f"__inference_{name}_")]) == 1, modules
    assert len([f for f in modules if "grad_fn" in f]) == 3, modules
    assert len(modules) == 6, modules


def test_references_hold_jax_outputs_at_two_batch_sizes(saved):
    path, record, _ = saved
    refs = record.signature("serving_default").references
    assert [r.batch_size for r in refs] == [1, 4]
    for ref in refs:
        inputs, outputs = references.read(path, ref)
        np.testing.assert_array_equal(
            outputs["logits"], np.asarray(example_model.apply(_params(), inputs["images"])))
    on_disk = manifest.read(path)
    assert on_disk == record
    assert json.loads((path / manifest.MANIFEST_FILE).read_text())["producer"]["jax"] == \
        jax.__version__


BLOCK_JAX = textwrap.dedent("""
    import importlib.abc, sys
    class _BlockJax(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in ("jax", "jaxlib"):
                raise ImportError("jax is blocked in this process: " + name)
    sys.meta_path.insert(0, _BlockJax())
""")


def test_gradients_survive_in_a_process_without_jax(saved, tmp_path):
    path, _, _ = saved
    images = example_model.example_images(3, seed=7)
    np.save(tmp_path / "images.npy", images)
    script = BLOCK_JAX + textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        loaded = tf.saved_model.load({str(path)!r})
        images = tf.constant(np.load({str(tmp_path / 'images.npy')!r}))
        with tf.GradientTape() as tape:
            tape.watch(images)
            logits = loaded.signatures["serving_default"](images=images)["logits"]
            loss = tf.reduce_sum(logits ** 2)
        names = [v.name.split(":")[0].split("/")[-1] for v in loaded.trainable_variables]
        grads = tape.gradient(loss, list(loaded.trainable_variables) + [images])
        np.savez({str(tmp_path / 'grads.npz')!r}, **dict(zip(names + ["images"],
                                                         [g.numpy() for g in grads])))
        assert "jax" not in sys.modules
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "unsaved custom gradients" not in proc.stderr
    loss = lambda p, x: jnp.sum(example_model.apply(p, x) ** 2)
    want_params, want_images = jax.grad(loss, argnums=(0, 1))(_params(), images)
    got = np.load(tmp_path / "grads.npz")
    for name, want in want_params.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["images"], want_images, rtol=1e-4, atol=1e-5)


def test_parameters_only_gradients_skip_the_input(tmp_path):
    path = tmp_path / "model"
    record = _save(path, input_gradients=False)
    assert manifest.read(path).input_gradients is False and record.input_gradients is False
    from saved_model_tools import inspect as inspect_lib
    assert "gradients: True (recompute, parameters only)" in (
        inspect_lib.inspect_saved_model(path).format())
    loaded = tf.saved_model.load(str(path))
    images = tf.constant(example_model.example_images(3, seed=7))
    with tf.GradientTape() as tape:
        tape.watch(images)
        [logits] = loaded.signatures["serving_default"](images=images).values()
        loss = tf.reduce_sum(logits ** 2)
    variables = list(loaded.trainable_variables)
    *grads, image_grad = tape.gradient(loss, variables + [images])
    assert image_grad is None
    want = jax.grad(lambda p: jnp.sum(example_model.apply(p, images.numpy()) ** 2))(_params())
    for v, g in zip(variables, grads):
        np.testing.assert_allclose(g.numpy(), want[v.name.split(":")[0].split("/")[-1]],
                                   rtol=1e-4, atol=1e-5)


def test_save_exported_from_bytes_keeps_gradients(tmp_path):
    params = _params()
    specs = jax.export.symbolic_args_specs((params, example_model.example_images(2)),
                                           (None, POLY[0]))
    blob = jax.export.export(jax.jit(example_model.apply))(*specs).serialize(vjp_order=1)
    record = saved_model_tools.save_exported(tmp_path / "m", blob, params=params,
                                             input_names=["images"])
    assert [r.batch_size for r in record.signature("serving_default").references] == [1, 2]
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    x = example_model.example_images(3)
    with tf.GradientTape() as tape:
        out = loaded.signatures["serving_default"](images=tf.constant(x))["output_0"]
        loss = tf.reduce_sum(out ** 2)
    grads = dict(zip([v.name for v in loaded.trainable_variables],
                     tape.gradient(loss, loaded.trainable_variables)))
    np.testing.assert_allclose(out.numpy(), example_model.apply(params, x), rtol=1e-5, atol=1e-5)
    want = jax.grad(lambda p: jnp.sum(example_model.apply(p, x) ** 2))(params)
    np.testing.assert_allclose(grads["params/conv_w:0"].numpy(), want["conv_w"], rtol=1e-4,
                               atol=1e-5)
    no_vjp = jax.export.export(jax.jit(example_model.apply))(*specs).serialize()
    with pytest.raises(ValueError, match=r"carries no VJP.*vjp_order=1.*with_gradient=False"):
        saved_model_tools.save_exported(tmp_path / "n", no_vjp, params=params)
    assert not (tmp_path / "n").exists()


def test_existing_directory_needs_overwrite(tmp_path):
    path = tmp_path / "model"
    _save(path, signatures=None)
    stamp = (path / "saved_model.pb").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _save(path)
    assert (path / "saved_model.pb").read_bytes() == stamp
    _save(path, overwrite=True, output_names=["scores"])
    loaded = tf.saved_model.load(str(path))
    assert list(loaded.signatures["serving_default"].structured_outputs) == ["scores"]
    assert sorted(os.listdir(tmp_path)) == ["model"]  # no temporaries left beside it


def test_failure_leaves_previous_model_and_no_debris(tmp_path):
    path = tmp_path / "model"
    _save(path)
    before = {p.name: p.stat().st_size for p in path.rglob("*") if p.is_file()}

    def broken(params, images):
        raise RuntimeError("boom in the model")

    with pytest.raises(RuntimeError, match="boom"):
        saved_model_tools.save(path, broken, _params(), [example_model.example_images(2)],
                               overwrite=True)
    with pytest.raises(ValueError, match="output_names"):
        _save(path, overwrite=True, output_names=["a", "b"])
    assert {p.name: p.stat().st_size for p in path.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path)) == ["model"]
    new_path = tmp_path / "parents" / "that" / "did" / "not" / "exist"
    with pytest.raises(ValueError, match="output_names"):
        _save(new_path, output_names=["a", "b"])
    assert sorted(os.listdir(tmp_path)) == ["model"]


# Phases 1-2 end before the temporary directory exists; 3-4 write it; 5 follows the commit.
_KILL_PHASES = [3, 4, 5]


def _writer_killed_after(path, phase) -> list[str]:
    """A child's arguments: save the CNN to `path` and SIGKILL itself right after printing
    phase `phase` of the save."""
    return ["-c", textwrap.dedent(f"""
        import os, signal, sys
        import saved_model_tools
        from jax2tf_native import example_model
        def progress(line):
            print(line, flush=True)
            if line.startswith("[{phase}/5]"):
                os.kill(os.getpid(), signal.SIGKILL)
        saved_model_tools.save({str(path)!r}, example_model.apply, example_model.init_params(0),
                               [example_model.example_images(2)], polymorphic_shapes=["(b, 28, 28, 1)"],
                               input_names=["images"], output_names=["new"], overwrite=True,
                               progress=progress)
    """)]


@pytest.fixture(scope="module")
def killed_writers(request, tmp_path_factory):
    """phase -> (the model path, the writer killed after that phase): each path first holds a
    complete "old" model, then the writers run side by side (each imports TF and JAX and saves:
    one after another they cost ~18 s of the suite on 2 cores)."""
    phases = [p for p in _KILL_PHASES if any(
        item.path == request.path and getattr(item, "callspec", None)
        and item.callspec.params.get("phase") == p for item in request.session.items)]
    paths = {}
    for phase in phases:
        paths[phase] = tmp_path_factory.mktemp(f"killed_at_{phase}") / "model"
        _save(paths[phase], output_names=["old"])
    pool = child_runner.ChildPool(
        {phase: child_runner.Job(_writer_killed_after(paths[phase], phase), timeout=600,
                                     what=f"the writer killed after phase {phase}")
         for phase in phases}, parallel=len(os.sched_getaffinity(0)))
    yield {phase: (paths[phase], pool) for phase in phases}
    pool.close()


@pytest.mark.parametrize("phase", _KILL_PHASES)
def test_sigkill_at_each_phase_leaves_old_or_new_complete_model(killed_writers, phase):
    """A writer killed right after printing phase `phase` leaves either the previous model or
    the new complete one at the path, never a mix or nothing; the next save cleans up."""
    path, pool = killed_writers[phase]
    tmp_path = path.parent
    proc = pool.result(phase)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    loaded = tf.saved_model.load(str(path))
    outputs = list(loaded.signatures["serving_default"].structured_outputs)
    assert outputs == (["new"] if phase == 5 else ["old"])
    x = example_model.example_images(2)
    got = loaded.signatures["serving_default"](images=tf.constant(x))[outputs[0]]
    np.testing.assert_allclose(got.numpy(), example_model.apply(_params(), x), rtol=1e-5,
                               atol=1e-5)
    debris = [p for p in os.listdir(tmp_path) if p != "model"]
    assert len(debris) <= 1  # at most the killed writer's temporary directory
    _save(tmp_path / "other")  # an unrelated save does not touch it
    _save(path, overwrite=True)  # the next save of this path removes it
    assert sorted(os.listdir(tmp_path)) == ["model", "other"]


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="fn must be callable"):
        saved_model_tools.save(tmp_path / "m", 3, {}, [])
    with pytest.raises(TypeError, match="example_args must be a list"):
        saved_model_tools.save(tmp_path / "m", example_model.apply, _params(),
                               example_model.example_images(1))
    with pytest.raises(ValueError, match="input_names must be identifiers"):
        _save(tmp_path / "m", input_names=["bad name"])
    with pytest.raises(ValueError, match="polymorphic_shapes has 2 entries for 1"):
        saved_model_tools.save(tmp_path / "m", example_model.apply, _params(),
                               [example_model.example_images(1)], polymorphic_shapes=["b", "b"])
    with pytest.raises(ValueError, match="preprocess needs input_signature"):
        saved_model_tools.Signature("s", preprocess=lambda x: x)
    with pytest.raises(ValueError, match="signature name must be an identifier"):
        saved_model_tools.Signature("serving default")
    assert os.listdir(tmp_path) == []
