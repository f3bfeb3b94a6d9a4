"""`jax2tf-native demo`: convert the built-in model and compare JAX and TF at several batches."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
from jax2tf_native import example_model

BATCH_SIZES = (1, 7, 64)


def median_seconds_per_call(fn: Callable, repeats: int) -> float:
    """Median seconds per call, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def run(batch_sizes: Sequence[int] = BATCH_SIZES, repeats: int = 20, rtol: float = 1e-5,
        atol: float = 1e-5, out=print) -> bool:
    """Converts the example model once, runs it at each batch size; True if all outputs agree.

    Example:
        >>> lines = []
        >>> run(batch_sizes=(1, 3), repeats=1, out=lines.append)
        True
        >>> lines[-1]
        'all outputs agree'
    """
    params = example_model.init_params(0)
    model = lambda images: example_model.apply(params, images)
    out(f"jax {jax.__version__}, tensorflow {tf.__version__}: converting the example CNN "
        f"with polymorphic_shapes={example_model.POLYMORPHIC_SHAPE!r}")
    start = time.perf_counter()
    model_tf = jax2tf_native.convert(model, polymorphic_shapes=[example_model.POLYMORPHIC_SHAPE])
    signature = jax2tf_native.input_signature(
        [example_model.example_images(1)], [example_model.POLYMORPHIC_SHAPE])
    serving_fn = tf.function(model_tf, input_signature=signature, autograph=False)
    serving_fn.get_concrete_function()
    out(f"converted and traced in {time.perf_counter() - start:.2f} s "
        f"(one export serves every batch size)")
    model_jax = jax.jit(model)
    out(f"{'batch':>6} {'max |jax - tf|':>15} {'agree':>6} {'jax ms/call':>12} {'tf ms/call':>11}")
    all_agree = True
    for batch in batch_sizes:
        images = example_model.example_images(batch, seed=batch)
        expected = np.asarray(model_jax(images))
        got = serving_fn(tf.constant(images)).numpy()
        agree = got.shape == expected.shape and np.allclose(got, expected, rtol=rtol, atol=atol)
        all_agree &= bool(agree)
        jax_s = median_seconds_per_call(lambda: model_jax(images).block_until_ready(), repeats)
        tf_input = tf.constant(images)
        tf_s = median_seconds_per_call(lambda: serving_fn(tf_input).numpy(), repeats)
        diff = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("inf")
        out(f"{batch:>6} {diff:>15.2e} {'yes' if agree else 'NO':>6} {jax_s * 1e3:>12.3f} "
            f"{tf_s * 1e3:>11.3f}")
    out("all outputs agree" if all_agree else "MISMATCH between JAX and TF outputs")
    return all_agree
