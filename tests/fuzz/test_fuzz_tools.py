"""The fuzzer's own machinery: generated programs are deterministic, valid and printable;
the shrinker keeps a failure while removing what it does not need; reproducers run."""
import dataclasses
import json
import subprocess
import sys

import jax
import numpy as np
import pytest

from tools import lowering_version
from tools.lax_fuzz import batch, generate, report, reproducer, runner, scales, shrink
from tools.lax_fuzz import program as program_lib
from tools.lax_fuzz.check import Mismatch
from tools.lax_fuzz.program import Output, Program, Step

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_programs_are_a_function_of_the_seed_and_trace():
    settings = batch.Settings(pack=8)
    first, again = batch.draw(3, 1, settings), batch.draw(3, 1, settings)
    assert [p.source() for p in first.programs] == [p.source() for p in again.programs]
    for a, b in zip(first.programs, again.programs):
        for name in a.inputs:  # bit for bit (numpy's NaN == NaN does not cover bfloat16)
            assert a.inputs[name].tobytes() == b.inputs[name].tobytes(), name
            assert a.inputs[name].dtype == b.inputs[name].dtype, name
    with jax.enable_x64(first.x64):
        for p in first.programs:
            outs = jax.eval_shape(p.function(), *generate.specs(p))
            assert [tuple(o.shape) for o in outs] == [o.shape for o in p.outputs] \
                or p.polymorphic
            assert [np.dtype(o.dtype).name for o in outs] == [o.dtype for o in p.outputs]


def test_array_source_rebuilds_special_values_exactly():
    value = np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, 1.1]], np.float32)
    rebuilt = eval(program_lib.array_source(value), dict(program_lib.NAMESPACE))
    assert rebuilt.dtype == np.float32
    np.testing.assert_array_equal(rebuilt.view(np.uint32)[~np.isnan(value)],
                                  value.view(np.uint32)[~np.isnan(value)])
    z = program_lib.complex_array(np.float32([-0.0, np.inf]), np.float32([np.nan, -0.0]))
    back = eval(program_lib.array_source(z), dict(program_lib.NAMESPACE))
    assert back.dtype == np.complex64
    assert np.signbit(back.real[0]) and np.isinf(back.real[1]) and np.signbit(back.imag[1])


def _nan_program() -> Program:
    """exp(x) + y, reshaped: NaN where x or y holds one."""
    x = np.array([[1.0, 2.0], [np.nan, 3.0]], np.float32)
    y = np.array([[0.5, -0.0], [4.0, 5.0]], np.float32)
    steps = [Step("v0", "lax.exp({0})", ("x0",), "exp", None, ("libm",), "float32", (2, 2)),
             Step("v1", "lax.add({0}, {1})", ("v0", "x1"), "add", None, ("libm",), "float32",
                  (2, 2)),
             Step("v2", "jnp.reshape({0}, (4,))", ("v1",), "reshape", None, ("libm",),
                  "float32", (4,))]
    return Program({"x0": x, "x1": y}, {}, steps, [Output("v2", ("libm",), None, "float32",
                                                          (4,))])


def test_shrink_keeps_the_failure_and_drops_the_rest():
    def fails(p):  # "a NaN comes out": evaluated by JAX, as a real predicate would
        return any(np.isnan(np.asarray(o)).any() for o in jax.jit(p.function())(*p.inputs.values()))
    small, tries = shrink.shrink(_nan_program(), fails, max_tries=80, seconds=120)
    assert fails(small) and tries > 0
    assert small.ops == ["exp"], small.source()  # add and reshape were not needed
    (value,) = small.inputs.values()
    assert value.shape == (1, 1) and np.isnan(value).all(), value


def test_a_reproducer_runs_and_applies_the_contract(tmp_path):
    program = _nan_program()
    mismatch = Mismatch("plain", "value", 0, "value", "float32", ("libm",), "none: a check")
    path = tmp_path / "repro.py"
    path.write_text(reproducer.script(program, mismatch, "test"))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={"PYTHONPATH": str(REPO),
                                                      "TF_CPP_MIN_LOG_LEVEL": "2",
                                                      "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "equal under the contract" in done.stdout, done.stdout
    assert "nan" in done.stdout


def test_known_classes_are_per_path():
    from tools.lax_fuzz import known
    zero = Mismatch("plain", "value", 0, "signed_zero", "float32", (), "")
    assert known.classify(zero, ["max_const"]).startswith("TF's Relu and MaxPool")
    assert known.classify(Mismatch("xla", "value", 0, "signed_zero", "float32", (), ""),
                          ["sub_const"]) is None
    # The classes issue 35 fixed are no longer known: a recurrence is unexplained.
    assert known.classify(zero, ["sign"]) is None
    assert known.classify(zero, ["sub_const"]) is None  # the plain lowering's kernels only
    floor = Mismatch("plain", "value", 0, "infinity", "float32", (), "",
                     repr(-3.4028234663852886e38), repr(-np.inf))
    assert known.classify(floor, ["reduce_window_max"]).startswith("TF's MaxPool")
    assert known.classify(floor, ["reduce_window_min"]) is None
    fma = Mismatch("plain", "value", 0, "infinity", "bfloat16", (), "", repr(2.93759e38),
                   repr(np.inf))
    assert known.classify(fma, ["conv"]).startswith("TF's Conv and MatMul")
    assert known.classify(fma, ["reduce_sum"]) is None  # sums follow XLA's association
    inf_minus_inf = dataclasses.replace(fma, kind="nan", got=repr(np.nan))
    assert known.classify(inf_minus_inf, ["conv"]).startswith("TF's Conv and MatMul")
    small_nan = dataclasses.replace(inf_minus_inf, want=repr(1.5))
    assert known.classify(small_nan, ["conv"]).startswith("conv: an infinite or NaN kernel")
    assert known.classify(small_nan, ["dot_general"]) is None
    one = np.float32(1.5)
    near = Mismatch("plain", "value", 0, "value", "float32", (), "",
                    repr(float(np.nextafter(one, np.float32(2)))), repr(float(one)))
    far = dataclasses.replace(near, got=repr(float(one + 4 * np.spacing(one))))
    assert known.classify(near, ["div"]).startswith("Grappler")
    assert known.classify(far, ["div"]) is None
    nan = Mismatch("xla", "value", 0, "nan", "float32", (), "")
    assert known.classify(nan, ["reduce_max"]).startswith("TF's XLA")
    assert known.classify(nan, ["exp"]) is None
    assert known.classify(nan, ["scan_max"]).startswith("TF's XLA")
    assert known.new_class(nan, ["exp", "max", "exp"]) == "xla value nan float32: exp+max"


def test_xla_simplifications_the_long_run_found_are_known_and_real():
    """The two classes the long run found after the lean graphs merged: both are XLA's
    algebraic simplifier (1 / (1 / y) -> y; 0 + x -> x once a one-step scan is unrolled),
    which TF's kernels do not do. Run here both ways, so the class names stay true."""
    import jax.numpy as jnp
    import tensorflow as tf
    from jax import lax

    import jax2tf_native
    from tools.lax_fuzz import known

    def twice_reciprocal(x):
        return lax.div(jnp.ones_like(x), lax.div(jnp.ones_like(x), x))

    x = np.array([22.969631], np.float32)
    want = np.asarray(jax.jit(twice_reciprocal)(x))
    got = jax2tf_native.convert(twice_reciprocal, enable_xla=False)(tf.constant(x)).numpy()
    assert want[0] == x[0]  # XLA returned y itself
    assert got[0] == np.float32(1) / (np.float32(1) / x[0]) != want[0]  # two roundings
    assert known.classify(Mismatch("plain", "value", 0, "value", "float32", (),
                                   "worst at (0,): got 22.9696, expected 22.9696 (1 ulps)",
                                   repr(float(got[0])), repr(float(want[0]))),
                          ["reciprocal"]).startswith("XLA simplifies 1 / (1 / y)")

    def scan_sum(x):
        return lax.scan(lambda c, xi: (c + xi, c), jnp.zeros_like(x[0]), x)[0]

    with jax.enable_x64(True):
        x = np.array([[-5e-324]], np.float64)
        want = np.asarray(jax.jit(scan_sum)(x))
        got = jax2tf_native.convert(scan_sum, enable_xla=False)(tf.constant(x)).numpy()
    assert want[0] == -5e-324 and got[0] == 0 and not np.signbit(got[0])
    subnormal = Mismatch("plain", "value", 0, "value", "float64", (), "", "0.0", "-5e-324")
    assert known.classify(subnormal, ["scan"]).startswith("x + 0 for a negative subnormal")
    assert known.classify(subnormal, ["cumsum"]) is None


def test_jaxlibs_exp_of_nan_padding_is_finite_and_known():
    """jaxlib's XLA gives finite values for exp of a NaN it gets from a constant (NaN
    padding here), where exp(NaN) is NaN; the plain graph gives NaN. Run here, so the class
    stays true of jaxlib (when jaxlib fixes it this fails, and the class can go)."""
    import jax.numpy as jnp
    import tensorflow as tf
    from jax import lax

    import jax2tf_native
    from tools.lax_fuzz import known

    def f(x):
        return lax.cosh(lax.pad(x, jnp.array(np.nan, x.dtype), ((2, 0, 0), (0, -2, 0))))

    x = np.ones((1, 4), jnp.bfloat16)
    # The values vary from call to call, and a call may give NaN: measured, 1 call in 50
    # gave all 4 NaN, none of the next ones.
    calls = [np.asarray(jax.jit(f)(x)).astype(np.float32) for _ in range(10)]
    got = np.asarray(jax2tf_native.convert(f, enable_xla=False)(tf.constant(x))).astype(
        np.float32)
    assert np.isnan(got[:2]).all() and any(np.isfinite(w[:2]).any() for w in calls)
    np.testing.assert_array_equal(got[2:], calls[0][2:])
    nan_for_finite = Mismatch("plain", "value", 0, "nan", "bfloat16", (), "", "nan", "2.5e-21")
    assert known.classify(nan_for_finite, ["pad", "cosh"]).startswith(
        "jaxlib's XLA: exp of a NaN constant")
    assert known.classify(nan_for_finite, ["pad", "tanh"]) is None


def test_an_overflowed_product_behind_a_relu_is_known_by_its_magnitude():
    """The long run's conv layer: XLA's fused multiply-adds give inf - inf = NaN where TF's
    Conv2D gives -inf, and the ReLU makes that 0. A ReLU that drops a NaN input gives the same
    values (0 for NaN); the magnitude at the element tells them apart (inf, or NaN)."""
    import jax.numpy as jnp
    import tensorflow as tf
    from jax import lax

    import jax2tf_native
    from tools.lax_fuzz import check, known

    x = np.array([[[[1.0, 1.0, np.inf]], [[-3.4028235e+38, 1.0, 1.0]]]], np.float32)
    w = np.array([[[[-1.25], [0.0], [-1.5]]], [[[-2.0], [0.75], [0.25]]],
                  [[[-0.75], [0.25], [-0.25]]]], np.float32)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    want = np.asarray(jax.jit(conv)(x, w)).ravel()
    got = jax2tf_native.convert(conv, enable_xla=False)(tf.constant(x), tf.constant(w))
    assert np.isnan(want[1]) and np.asarray(got).ravel()[1] == -np.inf
    layer = lambda x, w: jax.nn.relu(conv(x, w))
    relu = jax2tf_native.convert(layer, enable_xla=False)(tf.constant(x), tf.constant(w))
    assert np.asarray(relu).ravel()[1] == 0 and np.isnan(np.asarray(jax.jit(layer)(x, w))[0, 1])
    magnitude = np.asarray(9 * conv(jnp.abs(x), jnp.abs(w)))
    detail = "1 non-finite element(s) differ; first at (0, 1, 0, 0): got 0, expected nan"
    assert check._scale_at(magnitude, (0, 1, 0, 0)) == "inf"
    relu_of = lambda scale: Mismatch("plain", "value", 0, "nan", "float32", (), detail, "0.0",
                                     "nan", scale)
    assert known.classify(relu_of("inf"), ["conv_layer_relu"]).startswith(
        "TF's Conv and MatMul kernels behind a ReLU")
    assert known.classify(relu_of("nan"), ["conv_layer_relu"]) is None  # a NaN input
    assert known.classify(relu_of("3.0"), ["conv_layer_relu"]) is None
    assert known.classify(relu_of(""), ["dense_layer_relu6"]) is None  # records before it


def test_a_run_is_not_resumed_on_another_lowering(tmp_path):
    # A run resumed after the lowering changed would report one run over two lowerings.
    here = lowering_version.fingerprint()
    assert len(here) == 12 and int(here, 16) >= 0
    record = {"batch": 0, "seed": 0, "programs": 24, "findings": [], "refused": [],
              "lowering": "0123456789ab", "commit": "abc1234", "time": 1.0}
    (tmp_path / "batches-1.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(SystemExit, match="1 batches run on another lowering.*abc1234"):
        runner.run(tmp_path, programs=48, seed=0, settings=batch.Settings(), workers=1,
                   chunk=1, per_class=1, shrink_seconds=1.0, bound=60.0, command="test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batches-1.jsonl"]  # nothing written
    mixed = [record, dict(record, batch=1, lowering=here, commit="def5678")]
    assert "batches on 2 lowerings" in report._lowering_line(mixed)
    assert "every batch on one lowering" in report._lowering_line(mixed[1:])


def test_an_overflow_counts_where_another_element_is_already_infinite():
    # The derivative bound's overflow rule: acosh'' at -FLT_MAX (x * x overflows) next to an
    # input of -inf was once an unexplained mismatch because the -inf hid the overflow.
    square = lambda x: x * x
    _, biggest = scales.largest_term(square, np.array([-np.inf, -3.4e38], np.float32))
    assert np.isinf(biggest)
    _, biggest = scales.largest_term(square, np.array([-np.inf, 2.0], np.float32))
    assert biggest == 4.0  # inf * inf is no overflow of finite operands


def test_generated_layers_keep_their_weights_static_and_their_nan_unexplained():
    # A layer (product + jnp-broadcast bias + activation) is what Grappler fuses into oneDNN's
    # kernels; a ReLU there once made NaN 0 with a symbolic batch, which no single-op program
    # showed. Its weights stay static when the program is symbolic, as a model's parameters.
    from tools.lax_fuzz import known
    rng = np.random.default_rng(11)
    layers = []
    while len(layers) < 3:
        p = generate.generate(rng, x64=False, polymorphic=1.0)
        if any("_layer_" in op for op in p.ops) and p.symbolic:
            layers.append(p)
    for p in layers:
        assert p.parameters, p.source()
        for name in p.parameters & set(p.inputs):
            assert not any(p.symbolic.get(name, ())), (name, p.symbolic, p.source())
    nan = Mismatch("plain", "value", 0, "nan", "float32", ("reassociation",), "", "0.0", "nan")
    assert known.classify(nan, ["conv_layer_relu"]) is None   # not the padding class
    assert known.classify(nan, ["conv"]) is not None
    zero = Mismatch("plain", "value", 0, "signed_zero", "float32", (), "")
    assert known.classify(zero, ["dense_layer_relu"]).startswith("TF's Relu and MaxPool")
