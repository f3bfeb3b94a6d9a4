"""Corrupt `jax.export` artifacts: every mutated copy runs or raises our error, never more.

250 seeded mutations of one valid artifact (see tools/artifact_fuzz.py; tools/fuzz_artifacts.py
runs thousands, results in tools/results/fuzz_artifacts.md) through `call_exported`. Each must
run or raise one of our errors with a fix in its message; the unmutated artifact must still
give JAX's values afterwards, in the same process. The first parse of untrusted bytes happens
in a sandbox process: a parser crash or hang there is our error here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax2tf_native
import saved_model_tools
from jax2tf_native import artifact_sandbox, errors
from tools import artifact_fuzz

CASES = 250
# A seed whose mutated artifact aborts JAX's MLIR bytecode reader ("LLVM ERROR: unsupported
# floating-point type"): in-process, that kills the process. (Others segfault or loop; see
# tools/results/fuzz_artifacts.md.)
PARSER_ABORT_SEED = 20


def test_mutated_artifacts_run_or_raise_our_errors():
    art = artifact_fuzz.artifact()
    outcomes = {}
    for seed in range(CASES):
        kind, blob = artifact_fuzz.mutate(art.blob, seed, art.module_span)
        outcome, message = artifact_fuzz.run_case(blob, art)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome != "ran":
            assert "Fix" in message, (seed, kind, message)
        if seed % 50 == 49:
            artifact_fuzz.check_valid_call(art)
    print("outcomes:", outcomes)
    assert outcomes.get("ours:ExportedModuleError", 0) > CASES // 2, outcomes
    artifact_fuzz.check_valid_call(art)


def test_parser_abort_is_contained_and_leaves_no_state():
    art = artifact_fuzz.artifact()
    _, blob = artifact_fuzz.mutate(art.blob, PARSER_ABORT_SEED, art.module_span)
    with pytest.raises(errors.ExportedModuleError, match="crashed a sandbox process"):
        jax2tf_native.call_exported(blob)
    artifact_fuzz.check_valid_call(art)


def test_non_utf8_symbol_name_is_our_error():
    """tools/fuzz_artifacts.py seed 103520: a callee name that is not UTF-8 passes MLIR's
    verifier, and the bindings raised RuntimeError reading it in the custom-call check."""
    art = artifact_fuzz.artifact()
    _, blob = artifact_fuzz.mutate(art.blob, 103520, art.module_span)
    with pytest.raises(errors.ExportedModuleError,
                       match=r"malformed \(RuntimeError: nanobind.*Fix"):
        jax2tf_native.call_exported(blob)
    artifact_fuzz.check_valid_call(art)


def test_parse_over_time_bound_is_stopped(monkeypatch):
    art = artifact_fuzz.artifact()
    _, blob = artifact_fuzz.mutate(art.blob, 7, art.module_span)  # never seen: not cached
    monkeypatch.setattr(artifact_sandbox, "TIMEOUT_SECONDS", 0.0)
    with pytest.raises(errors.ExportedModuleError, match=r"did not finish within 0 s"):
        jax2tf_native.deserialize(blob + b"\0")
    monkeypatch.undo()
    artifact_fuzz.check_valid_call(art)


def test_fields_that_disagree_with_the_module_are_rejected():
    """A well-formed artifact whose declared input shape disagrees with its module's main."""
    exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), np.float32))
    lying = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((4,), np.float32))
    import dataclasses
    forged = dataclasses.replace(exp, mlir_module_serialized=lying.mlir_module_serialized)
    with pytest.raises(errors.ExportedModuleError,
                       match=r"declares float32\[3\] but the module's main has tensor<4xf32>"):
        jax2tf_native.call_exported(forged.serialize())
    with pytest.raises(errors.ExportedModuleError, match="tensor<4xf32>"):
        jax2tf_native.call_exported(forged)  # an Exported object: checked in-process
    kept = dataclasses.replace(exp, module_kept_var_idx=(0, 5))
    with pytest.raises(errors.ExportedModuleError, match=r"module_kept_var_idx \(0, 5\)"):
        jax2tf_native.call_exported(kept)


def test_save_exported_of_corrupt_bytes_writes_nothing(tmp_path):
    art = artifact_fuzz.artifact()
    for seed in (PARSER_ABORT_SEED, 3, 5):
        _, blob = artifact_fuzz.mutate(art.blob, seed, art.module_span)
        with pytest.raises(errors.ExportedModuleError, match="Fix"):
            saved_model_tools.save_exported(tmp_path / "m", blob, params=art.params)
    assert list(tmp_path.iterdir()) == []
