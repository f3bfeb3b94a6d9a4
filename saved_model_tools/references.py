"""Reference inputs and JAX's outputs for them, recorded inside a SavedModel for `verify`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

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


def jax_outputs(fn: Callable, params, args: Sequence[np.ndarray]):
    """JAX's result of fn(params, *args), as numpy arrays."""
    return jax.tree.map(np.asarray, jax.jit(fn)(params, *args))
