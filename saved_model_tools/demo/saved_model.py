"""`jax2tf-native demo --out DIR`: train the example model briefly, save it for TF Serving,
verify it without JAX, and report signatures, sizes, the verify result and latencies."""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

from jax2tf_native import example_model
from saved_model_tools import manifest
from saved_model_tools.write import saved_model as writer
from saved_model_tools import verify as verify_lib
from saved_model_tools.demo.jax_vs_tf import median_seconds_per_call

TRAIN_STEPS = 20
LEARNING_RATE = 0.5


def synthetic_batch(batch: int, seed: int):
    """Images and labels with a learnable rule: the label is the brightest of 10 pixel groups
    (groups of 78 consecutive pixels; the last 4 pixels belong to none)."""
    images = example_model.example_images(batch, seed)
    groups = images.reshape(batch, -1)[:, :780].reshape(batch, 10, 78).mean(axis=2)
    return images, np.argmax(groups, axis=1).astype(np.int32)


def train(steps: int = TRAIN_STEPS, out: Callable[[str], None] = print) -> dict:
    """A few SGD steps of the example CNN on synthetic data; returns the trained params."""
    params = example_model.init_params(0)

    def loss_fn(p, images, labels):
        logits = example_model.apply(p, images)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))

    @jax.jit
    def step(p, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(p, images, labels)
        return jax.tree.map(lambda w, g: w - LEARNING_RATE * g, p, grads), loss

    losses = []
    for i in range(steps):
        params, loss = step(params, *synthetic_batch(32, seed=i))
        losses.append(float(loss))
    out(f"trained {steps} SGD steps on synthetic data: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return params


def _replace_allowed(out_dir: Path) -> bool:
    """The demo replaces its own earlier output (a model with our manifest), nothing else."""
    return out_dir.exists() and manifest.read(out_dir) is not None


def run(out_dir: str, out: Callable[[str], None] = print) -> bool:
    """Trains, saves, verifies; True when the verification passed."""
    out_path = Path(out_dir)
    if out_path.exists() and not _replace_allowed(out_path):
        raise FileExistsError(f"{out_path} exists and is not a model written by this demo. "
                              f"Fix: choose another --out directory.")
    params = train(out=out)
    record = writer.save(
        out_path, example_model.apply, params, [example_model.example_images(8)],
        polymorphic_shapes=[example_model.POLYMORPHIC_SHAPE], input_names=["images"],
        output_names=["logits"], overwrite=True, progress=out,
        signatures=[writer.Signature(
            "classify_uint8",
            preprocess=lambda images: (tf.cast(images, tf.float32) / 255.0,),
            input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.uint8, "images")],
            postprocess=lambda logits: {"label": tf.argmax(logits, -1),
                                        "probability": tf.reduce_max(tf.nn.softmax(logits), -1)})])
    out(f"signatures of {out_path}:")
    for sig in record.signatures:
        inputs = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in sig.inputs)
        outputs = ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in sig.outputs)
        out(f"  {sig.name}({inputs}) -> {outputs}")
    files = [p for p in out_path.rglob("*") if p.is_file()]
    out(f"size: {sum(p.stat().st_size for p in files) / 1e3:.0f} kB in {len(files)} files "
        f"(saved_model.pb {(out_path / 'saved_model.pb').stat().st_size / 1e3:.0f} kB; "
        f"{record.variable_count} variables, {record.variable_bytes / 1e3:.0f} kB)")
    report = verify_lib.verify(out_path)
    out(report.format().rstrip())
    loaded = tf.saved_model.load(str(out_path))
    serve = loaded.signatures["serving_default"]
    jitted = jax.jit(example_model.apply)
    out(f"{'batch':>6} {'jax ms':>8} {'loaded TF ms':>13}")
    for batch in (1, 64):
        images = example_model.example_images(batch)
        tf_images = tf.constant(images)
        jax_ms = 1e3 * median_seconds_per_call(
            lambda: jitted(params, images).block_until_ready(), repeats=20)
        tf_ms = 1e3 * median_seconds_per_call(
            lambda: serve(images=tf_images)["logits"].numpy(), repeats=20)
        out(f"{batch:>6} {jax_ms:>8.3f} {tf_ms:>13.3f}")
    return report.ok


@functools.cache
def small_saved_model() -> Path:
    """A small SavedModel, `y = x @ w` with a polymorphic batch, written once per process into
    a temporary directory (removed at exit): the model the reading tools' examples read.

    Example:
        >>> (small_saved_model() / "saved_model.pb").is_file()
        True
    """
    directory = Path(tempfile.mkdtemp(prefix="jax2tf_native_example_"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    writer.save(directory / "model", lambda p, x: x @ p["w"], {"w": w},
                [np.ones((2, 3), np.float32)], polymorphic_shapes=["(b, 3)"],
                input_names=["x"], output_names=["y"])
    return directory / "model"
