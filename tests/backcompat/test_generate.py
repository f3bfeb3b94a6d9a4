"""The generator writes a complete artifact, keeps existing ones, and rewrites only with force."""
from __future__ import annotations

import jax
import numpy as np

from tools.backcompat import artifacts, generate, storage


def test_generate_keeps_existing_and_force_rewrites(tmp_path):
    spec = artifacts.ARTIFACTS_BY_NAME["stablehlo_top_k"]
    log = []
    assert generate.generate([spec], tmp_path, log=log.append) == ["stablehlo_top_k"]
    artifact = storage.read(tmp_path / spec.name)
    # What was frozen is what the function computes.
    want = jax.jit(spec.fun)(*spec.make_inputs())
    for got, expected in zip(artifact.expected, jax.tree.leaves(want)):
        np.testing.assert_array_equal(got, np.asarray(expected))
    assert artifact.metadata["jax_version"] == jax.__version__
    assert artifact.metadata["calling_convention_version"] == jax.export.deserialize(
        artifact.serialized).calling_convention_version

    # An old artifact must survive a second run: mark it and check the mark is still there.
    marker = tmp_path / spec.name / storage.EXPORTED_FILE
    marker.write_bytes(b"old artifact")
    assert generate.generate([spec], tmp_path, log=log.append) == []
    assert marker.read_bytes() == b"old artifact"
    assert "exists, kept" in log[-1] and "--force" in log[-1]

    assert generate.generate([spec], tmp_path, force=True, log=log.append) == ["stablehlo_top_k"]
    assert marker.read_bytes() != b"old artifact"
    assert "written" in log[-1]


def test_unknown_name_lists_known_ones():
    try:
        artifacts.select(["no_such_artifact"])
    except ValueError as e:
        assert "no_such_artifact" in str(e) and "stablehlo_sort" in str(e)
    else:
        raise AssertionError("select() accepted an unknown artifact name")
