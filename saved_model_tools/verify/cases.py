"""`verify`'s cases: which inputs each signature is called with, and how its outputs compare.

Runs in the verify child process (no JAX): reference cases from the recorded .npz files,
smoke cases (zeros) for models without them, and the per-output checks (shape, dtype, then
`compare`'s element-wise rule).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

from saved_model_tools import manifest as manifest_lib
from saved_model_tools import reference_file
from saved_model_tools.verify import compare as verify_compare
from saved_model_tools.verify.report import SMOKE_BATCH_SIZES, OutputCheck


@dataclasses.dataclass
class Case:
    """One signature call to make: inputs and what to compare the outputs with."""
    signature: str
    batch_size: int | None
    inputs: dict
    expected: dict | None   # output name -> array; None: compare tf1 with tf2 only
    expected_name: str
    rtol: float
    atol: float


def compare(case: Case, path: str, got: dict, expected: dict | None, signature_def) -> list:
    """One `OutputCheck` (as a dict) per output of the signature: `got` against `expected`
    within the case's tolerances, or only that it ran when there is no reference."""
    checks = []
    for name in sorted(signature_def.outputs):
        check = dict(signature=case.signature, path=path, batch_size=case.batch_size,
                     output=name, expected=case.expected_name if expected is not None else "runs")
        if name not in got:
            checks.append(OutputCheck(**check, passed=False,
                                      detail=f"missing from the call's outputs {sorted(got)}"))
            continue
        value = np.asarray(got[name])
        declared = signature_def.outputs[name].tensor_shape
        if not declared.unknown_rank:
            dims = [d.size for d in declared.dim]
            if len(dims) != value.ndim or any(d >= 0 and d != s
                                              for d, s in zip(dims, value.shape)):
                checks.append(OutputCheck(**check, passed=False, detail=(
                    f"shape {list(value.shape)} does not fit the declared "
                    f"{['?' if d < 0 else d for d in dims]}")))
                continue
        if expected is None:
            checks.append(OutputCheck(**check, passed=True,
                                      detail=f"{value.dtype}{list(value.shape)}"))
            continue
        if name not in expected:
            checks.append(OutputCheck(**check, passed=False,
                                      detail="no recorded value for this output"))
            continue
        want = np.asarray(expected[name])
        if want.shape != value.shape:
            checks.append(OutputCheck(**check, passed=False, detail=(
                f"shape {list(value.shape)}, recorded {list(want.shape)}")))
            continue
        if want.dtype != value.dtype:
            checks.append(OutputCheck(**check, passed=False, detail=(
                f"dtype {value.dtype}, recorded {want.dtype}")))
            continue
        if value.dtype.kind in "OSU":
            same = bool(np.array_equal(value, want))
            checks.append(OutputCheck(**check, passed=same,
                                      detail="" if same else "string values differ"))
            continue
        compared = verify_compare.compare_values(value, want, case.rtol, case.atol)
        checks.append(OutputCheck(**check, passed=compared.passed,
                                  max_abs_error=compared.max_abs_error, rtol=case.rtol,
                                  atol=case.atol, detail=compared.detail))
    return [dataclasses.asdict(c) for c in checks]


def reference_cases(directory: Path, recorded, batch_sizes, result: dict) -> list[Case]:
    """The cases of a signature's recorded reference files (unreadable ones go to
    `result["errors"]`)."""
    loaded = []
    for ref in recorded.references:
        try:
            path = manifest_lib.reference_path(directory, ref.file)
        except manifest_lib.ManifestError as e:
            result["errors"].append(f"signature {recorded.name!r}: {e}")
            continue
        if not path.is_file():
            result["errors"].append(
                f"signature {recorded.name!r}: reference file {path} is missing. Fix: re-save "
                f"the model (the manifest and its .npz files are written together).")
            continue
        try:
            data = reference_file.read(path)
        except manifest_lib.ManifestError as e:
            result["errors"].append(f"signature {recorded.name!r}: {e}")
            continue
        inputs = {t.name: data[f"inputs/{t.name}"] for t in recorded.inputs
                  if f"inputs/{t.name}" in data}
        outputs = {t.name: data[f"outputs/{t.name}"] for t in recorded.outputs
                   if f"outputs/{t.name}" in data}
        if len(inputs) != len(recorded.inputs):
            result["errors"].append(
                f"signature {recorded.name!r}: {path.name} lacks inputs "
                f"{sorted({t.name for t in recorded.inputs} - set(inputs))}. Fix: re-save.")
            continue
        loaded.append((ref, inputs, outputs))
    cases = []
    wanted = None if batch_sizes is None else list(batch_sizes)
    by_batch = {ref.batch_size: (ref, inputs, outputs) for ref, inputs, outputs in loaded}
    for size in (sorted(by_batch) if wanted is None else wanted):
        if size in by_batch:
            ref, inputs, outputs = by_batch[size]
            cases.append(Case(recorded.name, size, inputs, outputs,
                               f"{recorded.reference_source} reference", ref.rtol, ref.atol))
        elif loaded:
            # Unrecorded batch: the recorded rows repeated to `size`; only the TF paths agree.
            ref, inputs, _ = max(loaded, key=lambda item: item[0].batch_size)
            batched = [t.name for t in recorded.inputs if t.shape and t.shape[0] is None]
            if not batched:
                result["errors"].append(
                    f"signature {recorded.name!r} has no polymorphic batch dimension, so batch "
                    f"size {size} cannot be fed. Fix: use the recorded batch sizes "
                    f"{sorted(by_batch)}.")
                continue
            rows = np.arange(size) % ref.batch_size
            derived = {k: (v[rows] if k in batched else v) for k, v in inputs.items()}
            cases.append(Case(recorded.name, size, derived, None, "tf2 path", ref.rtol,
                               ref.atol))
    return cases


def smoke_cases(name: str, signature_def, batch_sizes, result: dict) -> list[Case]:
    """Zeros inputs at each batch size for a signature without references: it must run."""
    shapes = {}
    for key, info in signature_def.inputs.items():
        if info.tensor_shape.unknown_rank:
            result["errors"].append(f"signature {name!r} input {key!r} has unknown rank: no "
                                    f"zeros input can be built for a smoke run")
            return []
        dims = [d.size for d in info.tensor_shape.dim]
        if any(d < 0 for d in dims[1:]):
            result["errors"].append(
                f"signature {name!r} input {key!r} has open non-batch dimensions {dims}: no "
                f"zeros input can be built for a smoke run. Fix: save with "
                f"saved_model_tools.save to record reference inputs.")
            return []
        shapes[key] = (dims, tf.dtypes.as_dtype(info.dtype).as_numpy_dtype)
    has_batch = any(dims and dims[0] < 0 for dims, _ in shapes.values())
    sizes = tuple(batch_sizes or SMOKE_BATCH_SIZES) if has_batch else (None,)
    cases = []
    for size in sizes:
        inputs = {}
        for key, (dims, dtype) in shapes.items():
            shape = [size if (i == 0 and d < 0) else d for i, d in enumerate(dims)]
            inputs[key] = (np.full(shape, b"", dtype=object) if dtype == object
                           else np.zeros(shape, dtype=dtype))
        cases.append(Case(name, size, inputs, None, "tf2 path", 1e-6, 1e-6))
    return cases
