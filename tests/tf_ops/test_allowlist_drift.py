"""Our custom-call allowlist is exactly the installed JAX's stable list.

When a JAX upgrade adds, removes or renames a stable target, these tests fail with the
difference, so tf_ops/custom_call_allowlist.py is updated on purpose (with the target's platform,
emitting operation and TF-runnable claim) rather than drifting.
"""
from __future__ import annotations

# Tests may read JAX internals to compare: JAX has no public accessor for its stable list.
from jax._src.export import _export as jax_export_internals

from tf_ops.custom_call_allowlist import ALL_PLATFORMS, ALLOWLIST, ALLOWLIST_BY_TARGET

OURS = "tf_ops/custom_call_allowlist.py"


def _diff(ours: set[str], jax_set: set[str], what: str) -> str:
    only_jax = sorted(jax_set - ours)
    only_ours = sorted(ours - jax_set)
    lines = [f"{what} differs between {OURS} and the installed JAX "
             f"(jax._src.export._export):"]
    if only_jax:
        lines.append(f"  in JAX, missing from ours ({len(only_jax)}): add an AllowedTarget for each")
        lines += [f"    + {t}" for t in only_jax]
    if only_ours:
        lines.append(f"  in ours, no longer in JAX ({len(only_ours)}): JAX dropped its guarantee;"
                     f" remove them (old artifacts using them must then be documented)")
        lines += [f"    - {t}" for t in only_ours]
    return "\n".join(lines)


def test_allowlist_equals_jax_stable_list():
    jax_stable = set(jax_export_internals._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)
    ours = set(ALLOWLIST_BY_TARGET)
    assert ours == jax_stable, _diff(ours, jax_stable, "The stable custom-call list")


def test_cpu_kernels_are_exactly_jax_cpu_kernels():
    jax_cpu = set(jax_export_internals._CPU_FFI_KERNELS)
    ours = {t.target for t in ALLOWLIST if t.platforms == ("cpu",)}
    assert ours == jax_cpu, _diff(ours, jax_cpu, "The CPU-only (LAPACK) targets")


def test_gpu_kernels_are_exactly_jax_gpu_kernels():
    jax_gpu = set(jax_export_internals._GPU_FFI_KERNELS) | {
        "cu_threefry2x32_ffi", "hip_threefry2x32_ffi"}
    ours = {t.target for t in ALLOWLIST if set(t.platforms) <= {"cuda", "rocm"}
            and t.target.startswith(("cu", "hip"))}
    assert ours == jax_gpu, _diff(ours, jax_gpu, "The GPU (cu*/hip*) targets")
    for target in jax_gpu:
        expected = "cuda" if target.startswith("cu") else "rocm"
        assert ALLOWLIST_BY_TARGET[target].platforms == (expected,), target


def test_entries_are_well_formed():
    problems = []
    for entry in ALLOWLIST:
        if not entry.platforms or not set(entry.platforms) <= set(ALL_PLATFORMS):
            problems.append(f"{entry.target}: platforms {entry.platforms}")
        if not set(entry.tf_runnable_platforms) <= set(ALL_PLATFORMS):
            problems.append(f"{entry.target}: tf_runnable_platforms {entry.tf_runnable_platforms}")
        if not entry.emitted_by or not entry.note:
            problems.append(f"{entry.target}: emitted_by and note must say where it comes from")
    assert not problems, "\n".join(problems)
    assert len(ALLOWLIST_BY_TARGET) == len(ALLOWLIST), "duplicate targets"
