"""Seeded mutations of a serialized `jax.export` artifact, and one fuzz case run on them.

Shared by tests/reliability/test_fuzz_artifacts.py (a few hundred cases in CI) and
tools/fuzz_artifacts.py (thousands, results committed).
"""
from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

import jax2tf_native
from jax2tf_native import errors

# Every error a corrupt artifact may end in. Each message says what is wrong and the fix.
OUR_ERRORS = (errors.ExportedModuleError, errors.ArgumentTypeError, errors.ArgumentShapeError,
              errors.CustomCallNotAllowedError)
MUTATIONS = ("bit_flips", "truncate", "zero_span", "insert", "random_byte", "duplicate_span",
             "module_bit_flips")


def model(params, x):
    """Several arguments, a pytree, a polymorphic batch, a composite (erf), integer math."""
    h = jnp.tanh(x @ params["w"]) + params["b"]
    return {"logits": h, "erf": jax.lax.erf(x).sum(1), "count": (x > 0).sum(1)}


@dataclasses.dataclass(frozen=True)
class Artifact:
    blob: bytes
    params: dict
    x: np.ndarray
    expected: dict
    module_span: tuple[int, int]  # where mlir_module_serialized lies in blob


ARTIFACT_PATH = os.path.join(os.path.dirname(__file__), "data", "fuzz_artifact.bin")


def _params_and_x():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32),
              "b": rng.standard_normal(3).astype(np.float32)}
    return params, rng.standard_normal((5, 4)).astype(np.float32)


def write_artifact(path: str = ARTIFACT_PATH) -> None:
    """Exports `model` (vjp_order=1) and writes its bytes: the fuzz corpus's one seed file.

    Committed, because the bytes hold source locations that depend on the caller, and each
    seed must mutate the same bytes everywhere.
    """
    params, _ = _params_and_x()
    specs = jax.export.symbolic_args_specs((params, np.zeros((2, 4), np.float32)),
                                           (None, "b, ..."))
    exported = jax.export.export(jax.jit(model))(*specs)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(exported.serialize(vjp_order=1))


@functools.lru_cache(maxsize=1)
def artifact() -> Artifact:
    params, x = _params_and_x()
    with open(ARTIFACT_PATH, "rb") as f:
        blob = f.read()
    module = jax.export.deserialize(bytearray(blob)).mlir_module_serialized
    start = blob.find(module)
    expected = jax.tree.map(np.asarray, model(params, x))
    return Artifact(blob, params, x, expected, (start, start + len(module)))


def mutate(blob: bytes, seed: int, module_span: tuple[int, int]) -> tuple[str, bytes]:
    """(mutation name, mutated bytes), deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    kind = MUTATIONS[seed % len(MUTATIONS)]
    b = bytearray(blob)
    n = len(b)
    if kind == "bit_flips":
        for _ in range(rng.integers(1, 9)):
            i = int(rng.integers(n))
            b[i] ^= 1 << int(rng.integers(8))
    elif kind == "module_bit_flips":  # inside the StableHLO bytecode
        for _ in range(rng.integers(1, 4)):
            i = int(rng.integers(*module_span))
            b[i] ^= 1 << int(rng.integers(8))
    elif kind == "truncate":
        b = b[:int(rng.integers(n))]
    elif kind == "zero_span":
        i = int(rng.integers(n))
        width = min(int(rng.integers(1, 64)), n - i)
        b[i:i + width] = bytes(width)
    elif kind == "insert":
        i = int(rng.integers(n))
        b[i:i] = rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8).tobytes()
    elif kind == "random_byte":
        b[int(rng.integers(n))] = int(rng.integers(256))
    else:  # duplicate_span
        i, j = sorted(int(v) for v in rng.integers(n, size=2))
        b[j:j] = b[i:i + 32]
    return kind, bytes(b)


def run_case(blob: bytes, art: Artifact) -> tuple[str, str]:
    """Loads and calls a (possibly corrupt) artifact: ("ran" | "ours:<Error>", message).

    Any other exception propagates: that is a finding.
    """
    try:
        f_tf = jax2tf_native.call_exported(blob)
        out = f_tf(art.params, art.x)
        jax.tree.map(lambda t: t.numpy(), out)
        return "ran", ""
    except OUR_ERRORS as e:
        return f"ours:{type(e).__name__}", str(e)


def check_valid_call(art: Artifact) -> None:
    """The unmutated artifact still loads and gives JAX's values (no state left behind)."""
    out = jax2tf_native.call_exported(art.blob)(art.params, art.x)
    for key, want in art.expected.items():
        np.testing.assert_allclose(out[key].numpy(), want, rtol=1e-5, atol=1e-5, err_msg=key)
