"""Reference inputs and JAX's outputs for them, recorded inside a SavedModel for `verify`."""
from __future__ import annotations

import concurrent.futures
import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np
import tensorflow as tf

from saved_model_tools import manifest, reference_file

# Tolerances TF's outputs are compared with, by output dtype kind and size (TF's XLA and
# jaxlib's XLA may fuse differently, so float results can differ in the last bits).
_TOLERANCES = {2: (1e-2, 1e-2), 4: (1e-4, 1e-5), 8: (1e-8, 1e-10)}


def tolerance(dtypes: Sequence[np.dtype]) -> tuple[float, float]:
    """The loosest (rtol, atol) over the outputs' dtypes; integers compare exactly."""
    rtol = atol = 0.0
    for dtype in map(np.dtype, dtypes):
        if dtype.kind in "fc" or dtype.name == "bfloat16":
            size = dtype.itemsize // (2 if dtype.kind == "c" else 1)
            r, a = _TOLERANCES.get(size, (1e-4, 1e-5))
            rtol, atol = max(rtol, r), max(atol, a)
    return rtol, atol


def batch_sizes(example_batch: int) -> tuple[int, ...]:
    """Two batch sizes for a polymorphic batch: 1 and the example's (or 3 if that is 1)."""
    return (1, example_batch) if example_batch != 1 else (1, 3)


def resize_batch(array: np.ndarray, batch: int) -> np.ndarray:
    """The example's rows repeated/cut to `batch` rows (keeps real example values)."""
    return np.take(array, np.arange(batch) % array.shape[0], axis=0)


def random_inputs(specs: Sequence[tf.TensorSpec], batch: int, seed: int) -> list[np.ndarray]:
    """Deterministic inputs for raw TF input specs (e.g. uint8 images), leading dim = batch."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        shape = [batch if d is None else d for d in spec.shape.as_list()]
        dtype = spec.dtype.as_numpy_dtype
        if spec.dtype.is_integer:
            high = 256 if spec.dtype.size == 1 else 100
            arrays.append(rng.integers(0, high, size=shape).astype(dtype))
        elif spec.dtype.is_bool:
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def write(record_dir: Path, file_name: str, inputs: dict, outputs: dict) -> None:
    """Writes arrays "inputs/<name>" and "outputs/<name>" into record_dir/file_name (.npz)."""
    record_dir.mkdir(parents=True, exist_ok=True)
    arrays = {f"inputs/{k}": np.asarray(v) for k, v in inputs.items()}
    arrays.update({f"outputs/{k}": np.asarray(v) for k, v in outputs.items()})
    reference_file.write(record_dir / file_name, arrays)


def read(saved_model_dir: Path, reference: manifest.Reference) -> tuple[dict, dict]:
    """(inputs, outputs) of a recorded reference."""
    data = reference_file.read(manifest.reference_path(saved_model_dir, reference.file))
    inputs = {k[len("inputs/"):]: v for k, v in data.items() if k.startswith("inputs/")}
    outputs = {k[len("outputs/"):]: v for k, v in data.items() if k.startswith("outputs/")}
    return inputs, outputs


def lower_jax_outputs(fn: Callable, params, args: Sequence[np.ndarray]) -> Callable[[], Any]:
    """Traces and lowers `jax.jit(fn)(params, *args)` now; returns a function that compiles and
    runs it, giving JAX's result as numpy arrays, and that may be called from another thread.

    Tracing, lowering and the transfer of the arguments happen in the caller's thread because
    JAX's configuration contexts (`jax.enable_x64(True)`, ...) are thread-local: a new thread
    would trace with the global defaults. The returned function only compiles (jaxlib does not
    hold the GIL while XLA compiles) and runs the executable.

    Example:
        >>> run = lower_jax_outputs(lambda p, x: x * p, np.float32(2), [np.ones(3, np.float32)])
        >>> run()
        array([2., 2., 2.], dtype=float32)
    """
    lowered = jax.jit(fn).lower(params, *args)
    arrays = jax.device_put((params, *args))

    def compile_and_run():
        compiled = lowered.compile()
        placed = jax.device_put(arrays, compiled.input_shardings[0])
        return jax.tree.map(np.asarray, compiled(*placed))

    return compile_and_run


@contextlib.contextmanager
def in_background(compute: Callable[[], Any]) -> Iterator[concurrent.futures.Future]:
    """Runs `compute` on a thread; yields its future; on exit waits for the thread.

    `save` compiles and runs the JAX reference computations (`lower_jax_outputs`) this way
    while TF writes the SavedModel. `future.result()` re-raises what `compute` raised. On exit,
    also when the body raised, the thread is waited for: nothing of a save keeps running
    after it returns or fails.

    Example:
        >>> with in_background(lambda: 6 * 7) as pending:
        ...     pending.result()
        42
    """
    with concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="jax_references") as executor:
        yield executor.submit(compute)
