"""`verify` (and `tflite`) compare NaN and infinities by position: a model whose outputs hold
+inf, -inf and NaN verifies, and an infinity of the wrong sign, a finite value or a NaN where
the reference has an infinity is a mismatch whatever the tolerance."""
import jax.numpy as jnp
import numpy as np
import pytest
from tensorflow.core.protobuf import meta_graph_pb2

import saved_model_tools
from saved_model_tools import manifest, verify
from saved_model_tools.verify import cases as verify_cases
from saved_model_tools.verify.compare import compare_values

INF, NAN = np.inf, np.nan


def _log_scaled(params, x):
    return {"log": jnp.log(x) * params["scale"], "sum": jnp.sum(x, axis=1)}


def test_outputs_with_infinities_and_nan_save_and_verify(tmp_path):
    # log(0) = -inf, log(-1) = NaN, log(inf) = inf; the row sums are inf, NaN (inf - inf).
    x = np.array([[0.0, -1.0, INF, 2.0], [INF, -INF, 0.5, 1.0]], np.float32)
    params = {"scale": np.float32(3.0)}
    path = tmp_path / "log"
    saved_model_tools.save(path, _log_scaled, params, [x], input_names=["x"])
    want = _log_scaled(params, x)
    assert np.isneginf(want["log"][0, 0]) and np.isnan(want["log"][0, 1])
    assert np.isposinf(want["log"][0, 2]) and np.isnan(want["sum"][1])

    # The recorded reference is JAX's output, non-finite values included.
    record = manifest.read(path).signature("serving_default")
    (ref,) = record.references
    data = np.load(path / manifest.RECORD_DIR / ref.file)
    np.testing.assert_array_equal(data["outputs/log"], np.asarray(want["log"]))
    np.testing.assert_array_equal(data["outputs/sum"], np.asarray(want["sum"]))

    report = verify.verify(path)
    assert report.ok and report.jax_imported is False, report.format()
    compared = [c for c in report.checks if c.expected == "jax reference"]
    assert {(c.path, c.output) for c in compared} == {
        (p, o) for p in ("tf2", "tf1-session") for o in ("log", "sum")}
    assert all(c.passed and np.isfinite(c.max_abs_error) for c in compared), report.format()


@pytest.mark.parametrize("got, expected, passed", [
    ([-INF, NAN, INF, 1.0], [-INF, NAN, INF, 1.0 + 1e-7], True),
    ([INF, 1.0], [-INF, 1.0], False),    # wrong sign
    ([-INF, 1.0], [INF, 1.0], False),
    ([1e30, 1.0], [INF, 1.0], False),    # |1e30 - inf| <= atol + rtol * inf held before
    ([NAN, 1.0], [INF, 1.0], False),
    ([INF, 1.0], [NAN, 1.0], False),
    ([0.0, 1.0], [NAN, 1.0], False),
    ([0.0, 1.1], [0.0, 1.0], False),     # finite, outside the tolerance
])
def test_compare_values_matches_non_finite_by_position(got, expected, passed):
    result = compare_values(np.array(got, np.float32), np.array(expected, np.float32),
                            rtol=1e-5, atol=1e-5)
    assert result.passed is passed, result
    assert np.isfinite(result.max_abs_error)
    if not passed:
        bad = 1 if got[0] == expected[0] else 0
        assert f"at ({bad},): got {got[bad]:.6g}, expected {expected[bad]:.6g}" in result.detail


def test_complex_infinities_compare_by_position():
    inf_c = complex(INF, 0.0)
    assert compare_values(np.array([inf_c, 1j]), np.array([inf_c, 1j]), 1e-6, 1e-6).passed
    assert not compare_values(np.array([-inf_c, 1j]), np.array([inf_c, 1j]), 1e-6, 1e-6).passed


def test_verify_reports_a_wrong_sign_infinity_as_that_outputs_mismatch():
    """verify's per-output check (as the child runs it) on a recorded +inf served as -inf."""
    signature_def = meta_graph_pb2.SignatureDef()
    for name in ("log", "sum"):
        signature_def.outputs[name].tensor_shape.dim.add().size = 2
    case = verify_cases.Case("serving_default", None, {}, None, "jax reference", 1e-5, 1e-5)
    expected = {"log": np.array([INF, 0.5], np.float32), "sum": np.array([-INF, NAN],
                                                                         np.float32)}
    got = {"log": np.array([-INF, 0.5], np.float32), "sum": expected["sum"].copy()}
    checks = {c["output"]: c for c in verify_cases.compare(case, "tf2", got, expected,
                                                           signature_def)}
    assert checks["sum"]["passed"] is True, checks["sum"]
    assert checks["log"]["passed"] is False
    assert checks["log"]["detail"] == ("1 non-finite element(s) differ; first at (0,): "
                                       "got -inf, expected inf")
