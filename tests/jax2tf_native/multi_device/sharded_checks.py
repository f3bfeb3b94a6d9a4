"""Checks of sharded (multi-device) conversions, run by tests/jax2tf_native/test_sharded.py in a
subprocess.

The subprocess has 2 CPU devices for JAX (XLA_FLAGS set before JAX is imported), which the main
pytest process must not have. Each check asserts against JAX's own outputs and lowering; the
results go to a JSON file: {"<check>[shardy=on|off]": "ok" | "skipped: <why>" | "<traceback>"}.

Usage: python sharded_checks.py RESULT_JSON SAVE_DIR
"""
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import collections  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import jax2tf_native  # noqa: E402
import saved_model_tools  # noqa: E402
from jax2tf_native import errors  # noqa: E402

assert len(jax.devices()) == 2, jax.devices()
MESH = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
ROW = NamedSharding(MESH, P("x", None))
COL = NamedSharding(MESH, P(None, "x"))
X = (np.arange(8 * 4, dtype=np.float32).reshape(8, 4) - 10) / 10
W = np.linspace(-1, 1, 4 * 6, dtype=np.float32).reshape(4, 6)


def model_body(x, w):
    return jnp.tanh(jnp.sin(x) @ w) * 2


def model(x, w):
    return jax.lax.with_sharding_constraint(model_body(x, w), ROW) + 1


# ---- reading shardings out of HLO text (TF's and JAX's) ----

def _sharding_at(line: str) -> str | None:
    """The `sharding={...}` value on an HLO line (braces matched), None without one."""
    start = line.find("sharding={")
    if start < 0:
        return None
    i, depth = start + len("sharding="), 0
    for j in range(i, len(line)):
        depth += {"{": 1, "}": -1}.get(line[j], 0)
        if depth == 0:
            return line[i:j + 1]
    raise AssertionError(f"unbalanced sharding in {line}")


def _entry_lines(hlo: str) -> list[str]:
    entry = hlo[hlo.index("\nENTRY "):]
    return entry[:entry.index("\n}")].splitlines()


def jax_shardings(hlo: str) -> dict:
    """Per parameter, the result, and the user constraints of JAX's lowering."""
    entry = _entry_lines(hlo)
    params = {}
    for line in entry:
        m = re.search(r"parameter\((\d+)\)", line)
        if m:
            params[int(m.group(1))] = _sharding_at(line)
    root = [_sharding_at(line) for line in entry if line.strip().startswith("ROOT")][0]
    return {"inputs": [params[i] for i in sorted(params)], "output": root,
            "constraints": constraints(hlo)}


def constraints(hlo: str) -> list[str]:
    """Shardings of `with_sharding_constraint` ops (named for it in both lowerings)."""
    return sorted(_sharding_at(line) for line in hlo.splitlines()
                  if re.match(r"\s*(ROOT )?%?sharding_constraint[.\d]* = ", line)
                  and 'custom_call_target="Sharding"' in line)


def tf_shardings(hlo: str) -> dict:
    """The XlaSharding ops TF put around the XlaCallModule, and the constraints inside."""
    entry = _entry_lines(hlo)
    call = next(i for i, line in enumerate(entry) if 'op_type="XlaCallModule"' in line)
    marked = [(i, _sharding_at(line)) for i, line in enumerate(entry)
              if 'op_type="XlaSharding"' in line]
    return {"inputs": [s for i, s in marked if i < call],
            "outputs": [s for i, s in marked if i > call],
            "constraints": constraints(hlo)}


_IOTA = re.compile(r"devices=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?")


def explicit_devices(hlo: str) -> str:
    """HLO text with iota tile assignments (`devices=[2,1]<=[2]`) written out as device lists
    (`devices=[2,1]0,1`): TF prints shardings without Shardy in the explicit form."""
    def explicit(m):
        dims = [int(d) for d in m.group(1).split(",")]
        reshape = [int(d) for d in m.group(2).split(",")]
        ids = np.arange(int(np.prod(reshape))).reshape(reshape)
        if m.group(3):
            ids = ids.transpose([int(d) for d in m.group(3).split(",")])
        return f"devices=[{m.group(1)}]" + ",".join(map(str, ids.flat))
    return _IOTA.sub(explicit, hlo)


def tf_hlo(f_tf, *args) -> str:
    return explicit_devices(tf.function(f_tf, autograph=False, jit_compile=True)
                            .experimental_get_compiler_ir(*args)(stage="hlo",
                                                                 platform_name="CPU"))


def jax_hlo(jitted, *args) -> str:
    return explicit_devices(jitted.lower(*args).compiler_ir("hlo").as_hlo_text())


def run_everywhere(f_tf, args, want, rtol=1e-5):
    """Eager, tf.function, and tf.function(jit_compile=True) all equal JAX's `want`."""
    np.testing.assert_allclose(f_tf(*args).numpy(), want, rtol=rtol, atol=1e-6)
    for jit_compile in (False, True):
        g = tf.function(f_tf, autograph=False, jit_compile=jit_compile)
        np.testing.assert_allclose(g(*args).numpy(), want, rtol=rtol, atol=1e-6)


def tape_gradients(f_tf, args, jit_compile: bool | None):
    """TF tape gradients of sum(f(*args)**2) w.r.t. every argument (eager when None)."""
    def grads(*values):
        variables = [tf.Variable(v) for v in values] if jit_compile is None else list(values)
        with tf.GradientTape() as tape:
            tape.watch(variables)
            loss = tf.reduce_sum(f_tf(*variables) ** 2)
        return tape.gradient(loss, variables)
    if jit_compile is None:
        return [g.numpy() for g in grads(*args)]
    fn = tf.function(grads, autograph=False, jit_compile=jit_compile)
    return [g.numpy() for g in fn(*[tf.constant(a) for a in args])]


# ---- the checks ----

def check_jit_in_out_shardings():
    """PartitionSpec, None (unspecified) and omitted in/out shardings: values and HLO."""
    variants = {
        "spec_and_none": jax.jit(model, in_shardings=(ROW, None), out_shardings=COL),
        "out_omitted": jax.jit(model, in_shardings=(ROW, NamedSharding(MESH, P()))),
        "in_omitted": jax.jit(model, out_shardings=COL),
    }
    for name, jitted in variants.items():
        want = np.asarray(jitted(X, W))
        f_tf = jax2tf_native.convert(jitted, with_gradient=False)
        run_everywhere(f_tf, (X, W), want)
        jax_side, tf_side = jax_shardings(jax_hlo(jitted, X, W)), tf_shardings(tf_hlo(f_tf, X, W))
        assert tf_side["inputs"] == [s for s in jax_side["inputs"] if s], (name, tf_side, jax_side)
        assert tf_side["outputs"] == ([jax_side["output"]] if jax_side["output"] else []), (
            name, tf_side, jax_side)
        assert tf_side["constraints"] == jax_side["constraints"] != [], (name, tf_side, jax_side)
    assert tf_shardings(tf_hlo(jax2tf_native.convert(variants["spec_and_none"],
                                                     with_gradient=False), X, W))["inputs"], \
        "the declared input sharding must be marked"


def check_constraints_and_nested_jits():
    """Constraints in an unjitted function and in nested jits: same constraints as JAX's lowering."""
    inner = jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 3, COL),
                    in_shardings=ROW, out_shardings=COL)

    def nested(x, w):
        return inner(model(x, w)) + 1

    for fun in (model, nested):
        jitted = jax.jit(fun)
        want = np.asarray(jitted(X, W))
        f_tf = jax2tf_native.convert(fun, with_gradient=False)
        run_everywhere(f_tf, (X, W), want)
        jax_side = jax_shardings(jax_hlo(jitted, X, W))
        tf_side = tf_shardings(tf_hlo(f_tf, X, W))
        assert tf_side["constraints"] == jax_side["constraints"] != [], (tf_side, jax_side)
        assert tf_side["inputs"] == tf_side["outputs"] == [], tf_side  # none declared


def check_gradients_of_sharded_function():
    """Residual and recompute modes, eager and tf.function(+jit_compile): equal jax.grad; the
    cotangents TF returns carry the inputs' declared shardings, as in JAX's lowering of the VJP."""
    jitted = jax.jit(model, in_shardings=(ROW, None), out_shardings=COL)
    want = jax.grad(lambda x, w: jnp.sum(jitted(x, w) ** 2), argnums=(0, 1))(X, W)
    for mode in ("residuals", "recompute"):
        f_tf = jax2tf_native.convert(jitted, gradient_mode=mode)
        for jit_compile in (None, False, True):
            got = tape_gradients(f_tf, (X, W), jit_compile)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        # JAX's lowering of the VJP gives the cotangent of x the sharding of x.
        vjp_hlo = jax_hlo(jax.jit(lambda x, w, ct: jax.vjp(jitted, x, w)[1](ct)), X, W,
                          np.ones((8, 6), np.float32))
        x_sharding = jax_shardings(jax_hlo(jitted, X, W))["inputs"][0]
        assert x_sharding in vjp_hlo, (x_sharding, vjp_hlo)
        grad_hlo = tf_hlo(lambda x, w: tape_gradients_graph(f_tf, x, w), X, W)
        marked = [_sharding_at(line) for line in _entry_lines(grad_hlo)
                  if 'op_type="XlaSharding"' in line]
        assert marked.count(x_sharding) >= 2, (mode, marked)  # x in, and its cotangent out


def tape_gradients_graph(f_tf, x, w):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        loss = tf.reduce_sum(f_tf(x, w) ** 2)
    return tape.gradient(loss, [x, w])


def check_polymorphic_batch():
    jitted = jax.jit(model, in_shardings=(ROW, None), out_shardings=COL)
    # The sharded dimension must divide by the mesh axis for any batch, as in jax.export.
    f_tf = jax2tf_native.convert(jitted, polymorphic_shapes=["(2*b, 4)", None])
    signature = [tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([4, 6], tf.float32)]
    g = tf.function(f_tf, autograph=False, input_signature=signature)
    for batch in (2, 6, 8):
        x = X[:batch]
        np.testing.assert_allclose(g(x, W).numpy(), np.asarray(jitted(x, W)), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(f_tf(x, W).numpy(), np.asarray(jitted(x, W)), rtol=1e-5,
                                   atol=1e-6)
    grads = tape_gradients(f_tf, (X[:6], W), None)
    want = jax.grad(lambda x, w: jnp.sum(jitted(x, w) ** 2), argnums=(0, 1))(X[:6], W)
    for got, w in zip(grads, want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


def check_shard_map_converts_but_runs_only_on_its_devices():
    """shard_map with a psum: traces, saves; running it on this 1-device TF says why and how."""
    def body(x):
        return jax.lax.psum(jnp.sin(x), "x")
    jitted = jax.jit(jax.shard_map(body, mesh=MESH, in_specs=P("x"), out_specs=P()))
    x = np.arange(8, dtype=np.float32)
    f_tf = jax2tf_native.convert(jitted)
    g = tf.function(f_tf, autograph=False)
    concrete = g.get_concrete_function(tf.TensorSpec([8], tf.float32))
    assert [o.shape.as_list() for o in concrete.outputs] == [list(jitted(x).shape)]
    for call in (lambda: f_tf(x), lambda: g(x)):
        try:
            call()
        except (errors.ModuleNotRunnableHereError, tf.errors.InvalidArgumentError) as e:
            text = str(e).replace("\\'", "'")
            assert "exported for 2 devices" in text and "only a CPU device" in text, text
            assert "Fix: run it under a TPU/GPU tf.distribute strategy" in text, text
            assert "No registered implementation" not in text, text  # not XLA's raw error
        else:
            raise AssertionError("a shard_map module ran on one device")
    # Its gradient graph builds too, in both gradient modes, with the input's shape.
    want_grad = jax.grad(lambda v: jnp.sum(jitted(v)))(x)
    for mode in ("residuals", "recompute"):
        f_grad = jax2tf_native.convert(jitted, gradient_mode=mode)

        def grad(v):
            with tf.GradientTape() as tape:
                tape.watch(v)
                total = tf.reduce_sum(f_grad(v))
            return tape.gradient(total, v)

        concrete = tf.function(grad, autograph=False).get_concrete_function(
            tf.TensorSpec([8], tf.float32))
        assert concrete.outputs[0].shape.as_list() == list(want_grad.shape), mode


def check_single_device_mesh_runs():
    mesh1 = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,),
                          devices=jax.devices()[:1])
    def model1(x, w):
        return jax.lax.with_sharding_constraint(model_body(x, w), NamedSharding(mesh1, P("x")))

    jitted = jax.jit(model1, in_shardings=(NamedSharding(mesh1, P("x", None)), None))
    assert jax.export.export(jitted)(X, W).nr_devices == 1  # the premise: a 1-device mesh
    want = np.asarray(jitted(X, W))
    run_everywhere(jax2tf_native.convert(jitted), (X, W), want)
    got = tape_gradients(jax2tf_native.convert(jitted), (X, W), False)
    want_grads = jax.grad(lambda x, w: jnp.sum(jitted(x, w) ** 2), argnums=(0, 1))(X, W)
    for g, w in zip(got, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def check_tpu_module_builds_saves_and_fails_only_when_run(save_dir: Path):
    jitted = jax.jit(model, in_shardings=(ROW, None), out_shardings=COL)
    f_tf = jax2tf_native.convert(jitted, platforms=("tpu",))
    g = tf.function(f_tf, autograph=False)
    g.get_concrete_function(tf.TensorSpec([8, 4], tf.float32), tf.TensorSpec([4, 6], tf.float32))
    module = tf.Module()
    module.f = g
    tf.saved_model.save(module, str(save_dir / "tf_saved"))
    for call in (lambda: f_tf(X, W), lambda: g(X, W),
                 lambda: tf.saved_model.load(str(save_dir / "tf_saved")).f(X, W)):
        try:
            call()
        except (errors.ModuleNotRunnableHereError, tf.errors.InvalidArgumentError) as e:
            text = str(e).replace("\\'", "'")  # TF's Assert prints the message escaped
            assert "exported for platforms ('tpu',)" in text and "only a CPU device" in text, text
            assert "platforms=('cpu', 'tpu')" in text, text
        else:
            raise AssertionError("a TPU-only module ran on CPU")


def apply_params(params, x):
    """A model taking a params pytree, as saved_model_tools.save calls it."""
    y = jnp.tanh(x @ params["w"])
    return jax.lax.with_sharding_constraint(y, ROW) + params["b"]


PARAMS = {"w": W, "b": np.linspace(0, 1, 6, dtype=np.float32)}
PARAM_SHARDINGS = {"w": COL, "b": NamedSharding(MESH, P())}


def serving_module(directory):
    from saved_model_tools import inspect as inspect_lib
    report = inspect_lib.inspect_saved_model(directory)
    served = [m for m in report.modules if "serving_default" in m.signatures and m.devices > 1]
    assert len(served) == 1, report.format()
    return report, served[0]


def check_saved_model_keeps_shardings(save_dir: Path):
    """save (sharded jit, polymorphic batch): inspect shows 2 devices and JAX's shardings per
    input and output; verify runs it here (annotations only) and matches JAX."""
    from saved_model_tools import verify as verify_lib
    jitted = jax.jit(apply_params, in_shardings=(PARAM_SHARDINGS, ROW), out_shardings=COL)
    saved_model_tools.save(save_dir / "cpu", jitted, PARAMS, [X],
                           polymorphic_shapes=["(2*b, 4)"], input_names=["x"])
    _, module = serving_module(save_dir / "cpu")
    want = jax_shardings(jax_hlo(jitted, PARAMS, X))
    assert list(module.input_shardings) == want["inputs"], (module, want)
    assert list(module.output_shardings) == [want["output"]], (module, want)
    assert module.devices == 2 and module.not_runnable_here is None, module
    report = verify_lib.verify(save_dir / "cpu")
    assert report.status == "passed" and report.checks, report.format()


def check_saved_model_for_tpu_saves_and_verify_says_it_cannot_run_here(save_dir: Path):
    from saved_model_tools import verify as verify_lib
    jitted = jax.jit(apply_params, in_shardings=(PARAM_SHARDINGS, ROW), out_shardings=COL)
    saved_model_tools.save(save_dir / "tpu", jitted, PARAMS, [X], platforms=("tpu",),
                           polymorphic_shapes=["(2*b, 4)"], input_names=["x"])
    report, module = serving_module(save_dir / "tpu")
    assert module.platforms == ("TPU",) and "only a CPU device" in module.not_runnable_here
    assert "devices: 2" in report.format() and "in  [3] sharding" in report.format()
    result = verify_lib.verify(save_dir / "tpu")
    assert result.status == "not-runnable-here", result.format()
    assert result.exit_code == verify_lib.EXIT_NOT_RUNNABLE_HERE
    assert {c.output for c in result.checks} == {"in x", "out output_0"}, result.format()
    assert all(c.passed for c in result.checks), result.format()
    text = result.format()
    assert "NOT RUNNABLE ON THIS HOST" in text and "platforms=('cpu', 'tpu')" in text, text


def check_save_exported_keeps_shardings(save_dir: Path):
    from saved_model_tools import verify as verify_lib
    jitted = jax.jit(apply_params, in_shardings=(PARAM_SHARDINGS, ROW), out_shardings=COL)
    b, = jax.export.symbolic_shape("b")
    exported = jax.export.export(jitted)(PARAMS, jax.ShapeDtypeStruct((2 * b, 4), np.float32))
    saved_model_tools.save_exported(save_dir / "exported", exported.serialize(vjp_order=1),
                                    params=PARAMS, example_args=[X])
    _, module = serving_module(save_dir / "exported")
    want = jax_shardings(jax_hlo(jitted, PARAMS, X))
    assert list(module.input_shardings) == want["inputs"], (module, want)
    assert list(module.output_shardings) == [want["output"]], (module, want)
    report = verify_lib.verify(save_dir / "exported")
    assert report.status == "passed", report.format()


def check_flax_nnx_model(save_dir: Path):
    """A Flax NNX model with nnx.with_partitioning, created sharded under nnx.jit: converts,
    runs as JAX does, and saves with the shardings JAX lowers for it (the README recipe)."""
    try:
        from flax import nnx
    except ImportError:
        return "skipped: flax is not installed (pip install -e '.[frameworks]')"

    class MLP(nnx.Module):
        def __init__(self, rngs):
            init = nnx.initializers.lecun_normal()
            self.l1 = nnx.Linear(4, 8, kernel_init=nnx.with_partitioning(init, (None, "x")),
                                 rngs=rngs)
            self.l2 = nnx.Linear(8, 3, kernel_init=nnx.with_partitioning(init, ("x", None)),
                                 rngs=rngs)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(x)))

    @nnx.jit
    def create():
        model = MLP(nnx.Rngs(0))
        state = nnx.state(model)
        nnx.update(model, jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state)))
        return model

    with jax.set_mesh(MESH):
        model = create()
    graphdef, state = nnx.split(model)
    params = nnx.to_pure_dict(state)
    shardings = jax.tree.map(lambda a: a.sharding, params)
    assert shardings["l1"]["kernel"].spec == P(None, "x"), shardings

    def apply(params, x):
        merged = nnx.merge(graphdef, state)
        new_state = nnx.state(merged)
        nnx.replace_by_pure_dict(new_state, params)
        return nnx.merge(graphdef, new_state)(x)

    jitted = jax.jit(apply, in_shardings=(shardings, ROW))
    want = np.asarray(jitted(params, X))
    f_tf = jax2tf_native.convert(jitted)
    run_everywhere(f_tf, (params, X), want)
    jax_side = jax_shardings(jax_hlo(jitted, params, X))
    tf_side = tf_shardings(tf_hlo(jax2tf_native.convert(jitted, with_gradient=False), params, X))
    assert tf_side["inputs"] == [s for s in jax_side["inputs"] if s], (tf_side, jax_side)
    # nnx.jit itself converts too (its shardings stay inside the module).
    np.testing.assert_allclose(jax2tf_native.convert(nnx.jit(apply))(params, X).numpy(), want,
                               rtol=1e-5, atol=1e-6)
    saved_model_tools.save(save_dir / "nnx", jitted, params, [X],
                           polymorphic_shapes=["(2*b, 4)"], input_names=["x"])
    _, module = serving_module(save_dir / "nnx")
    assert list(module.input_shardings) == [s for s in jax_side["inputs"]], (module, jax_side)


def check_plain_ops_refuse_a_multi_device_module():
    """enable_xla=False: a module exported for 2 devices is refused, naming them (no XLA SPMD
    partitioner runs plain TF ops)."""
    jitted = jax.jit(model, in_shardings=(ROW, None), out_shardings=COL)
    f_tf = jax2tf_native.convert(jitted, enable_xla=False)
    try:
        f_tf(X, W)
    except errors.PlainLoweringError as e:
        assert "exported for 2 devices" in str(e) and "enable_xla=False" in str(e), str(e)
    else:
        raise AssertionError("a 2-device module ran as plain TF ops")


CHECKS = [check_jit_in_out_shardings, check_constraints_and_nested_jits,
          check_gradients_of_sharded_function, check_polymorphic_batch,
          check_shard_map_converts_but_runs_only_on_its_devices, check_single_device_mesh_runs,
          check_plain_ops_refuse_a_multi_device_module]


def main(result_file: str, save_dir: str) -> None:
    results = collections.OrderedDict()
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        tag = f"[shardy={'on' if shardy else 'off'}]"
        for check in CHECKS:
            try:
                check()
                results[check.__name__ + tag] = "ok"
            except Exception:
                results[check.__name__ + tag] = traceback.format_exc()
        out = Path(save_dir) / tag.strip("[]").replace("=", "_")
        out.mkdir(parents=True, exist_ok=True)
        # verify runs a child process each (~10 s): the SavedModel checks run once, with Shardy.
        saving = [check_tpu_module_builds_saves_and_fails_only_when_run]
        if shardy:
            saving += [check_flax_nnx_model, check_saved_model_keeps_shardings, check_save_exported_keeps_shardings,
                       check_saved_model_for_tpu_saves_and_verify_says_it_cannot_run_here]
        for check in saving:
            try:
                results[check.__name__ + tag] = check(out) or "ok"
            except Exception:
                results[check.__name__ + tag] = traceback.format_exc()
    Path(result_file).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
