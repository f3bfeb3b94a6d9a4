"""tf2onnx -> onnxruntime on our plain graphs, with tf2onnx's defaults: `from_function` with its
default opset, onnxruntime's CPU provider. Every model of models.py (single ops, the four
benchmark models, the Flax / Equinox models of tests/jax2tf_native/frameworks), `None` batch, equals
`jax.jit` at two batch sizes.

Tolerance: rtol 1e-4, atol 1e-5 * max(1, max |JAX output|): onnxruntime's MatMul, Conv and
reductions sum in their own order, so float32 results differ from XLA's by a few ulps of the
largest terms of a sum (measured at most 2.1e-6 on the transformer, whose outputs reach ~5),
and a near-zero output carries that absolute error, not a relative one.

NaN: a NaN input gives NaN exactly where JAX gives NaN on the models whose NaN result does not
depend on XLA's window loop order. Not on the CNN: XLA's CPU reduce_window drops a NaN
inside a max-pooling window (jax.jit gives a finite row), which our TF graph reproduces, while
onnxruntime's MaxPool / Max / Min propagate it (a NaN row). Infinities: `test_max_with_a_
constant_at_minus_infinity` records tf2onnx's SelectV2 rewrite (see there).
"""
from __future__ import annotations

import functools
import logging

import jax
import numpy as np
import pytest

from tests.consumers import models

tf2onnx = pytest.importorskip("tf2onnx", reason="tf2onnx is in the test extra "
                                                "(pip install -e '.[test]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is in the test extra "
                                                "(pip install -e '.[test]')")
logging.getLogger("tf2onnx").setLevel(logging.ERROR)


@functools.lru_cache(maxsize=None)
def _convert(name: str):
    """(session, ONNX proto, served model) of the model named `name`, converted once per session
    with tf2onnx's defaults (its default opset) and run on onnxruntime's CPU provider."""
    served = models.served(name)
    proto, _ = tf2onnx.convert.from_function(served.function, input_signature=served.specs)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session, proto, served


def _run(session, served, args) -> list:
    """Feeds by name: tf2onnx names the inputs after the specs (`input_0`)."""
    arrays = dict(zip((s.name for s in served.specs), served.flatten(args)))
    assert sorted(i.name for i in session.get_inputs()) == sorted(arrays)
    return session.run(None, arrays)


def _assert_close(got, want, what):
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale, err_msg=what)


@pytest.mark.parametrize("model", models.by_name())
def test_onnxruntime_equals_jax(model):
    session, proto, served = _convert(model.name)
    assert proto.opset_import[0].version == tf2onnx.constants.PREFERRED_OPSET  # the default
    for batch in (1, 3):
        args = model.inputs(batch)
        want = jax.tree.leaves(served.jax_call(*args))
        got = _run(session, served, args)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{model.name}, batch {batch}, output {i}")


@pytest.mark.parametrize("model", models.by_name(
    ["maximum_0.5", "relu_dense", "max_pool", "mlp", "transformer", "resnet"]))
def test_a_nan_input_gives_nan_where_jax_does(model):
    session, _, served = _convert(model.name)
    (x,) = model.inputs(2)
    x.reshape(2, -1)[0, 1] = np.nan  # the first example only
    (want,) = jax.tree.leaves(served.jax_call(x))
    want = np.asarray(want)
    (got,) = _run(session, served, [x])
    assert np.isnan(want).any() and not np.isnan(want[1]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    _assert_close(np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want), model.name)


def test_max_with_a_constant_at_minus_infinity():
    # Max with a nonzero constant is TF's Maximum, which tf2onnx makes ONNX's Max. (As a
    # compare and a select it met tf2onnx's Select rewrite, cond * c + (1 - cond) * x, and
    # 0 * -inf is NaN.)
    (model,) = [p.values[0] for p in models.by_name(["maximum_0.5"])]
    session, _, served = _convert(model.name)
    x = np.array([[-np.inf, np.inf, np.nan, -1.0, 0.5, 2.0]], np.float32)
    want = np.asarray(served.jax_call(x))
    (got,) = _run(session, served, [x])
    np.testing.assert_array_equal(got, want)
