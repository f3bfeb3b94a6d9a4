"""Exports each `ArtifactSpec` for CPU and freezes it with its inputs and expected outputs.

An existing artifact is never rewritten unless `force=True`: old artifacts are the point, they
prove that what an older JAX wrote still runs.
"""
from __future__ import annotations

import contextlib
import datetime
import pathlib
from typing import Callable, Iterator, Sequence

import jax
import jaxlib
import numpy as np

from jax2tf_native import linalg_portable
from tools.backcompat import storage
from tools.backcompat.artifacts import ArtifactSpec
from tf_ops import custom_call_check

PLATFORMS = ("cpu",)


@contextlib.contextmanager
def spec_config(spec: ArtifactSpec) -> Iterator[None]:
    """The JAX configuration `spec` is exported and run under (x64, Shardy)."""
    previous_shardy = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", spec.shardy)
    try:
        with jax.enable_x64(spec.requires_x64):
            yield
    finally:
        jax.config.update("jax_use_shardy_partitioner", previous_shardy)


def custom_call_targets(exported: jax.export.Exported) -> list[str]:
    """The distinct custom-call targets in the exported module, sorted (tf_ops' one scanner)."""
    return custom_call_check.custom_call_targets(exported)


def export_spec(spec: ArtifactSpec) -> jax.export.Exported:
    """Exports `spec.fun` for CPU; call inside `spec_config(spec)`.

    Every target is allowed at export (`custom_call("ALL")` is not needed: all our targets are on
    JAX's stable list, which `jax.export` enforces).
    """
    inputs = spec.make_inputs()
    if spec.polymorphic_shapes is None:
        args = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs)
    else:
        args = jax.export.symbolic_args_specs(inputs, spec.polymorphic_shapes)
    if not spec.portable_linalg:
        return jax.export.export(jax.jit(spec.fun), platforms=PLATFORMS)(*args)
    with linalg_portable.export_scope(platforms=PLATFORMS) as extra:
        return jax.export.export(jax.jit(spec.fun), platforms=PLATFORMS, **extra)(*args)


def _metadata(spec: ArtifactSpec, exported: jax.export.Exported) -> dict:
    return {
        "format_version": storage.FORMAT_VERSION,
        "name": spec.name,
        "description": spec.description,
        "calling_convention_version": exported.calling_convention_version,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "platforms": list(exported.platforms),
        "custom_call_targets": custom_call_targets(exported),
        "polymorphic_shapes": list(spec.polymorphic_shapes) if spec.polymorphic_shapes else None,
        "tolerance": {"rtol": spec.rtol, "atol": spec.atol},
        "requires_x64": spec.requires_x64,
        "shardy": spec.shardy,
        "portable_linalg": spec.portable_linalg,
    }


def generate_one(spec: ArtifactSpec, directory: pathlib.Path) -> dict:
    """Exports, round-trips through serialization, runs, and writes one artifact.

    The expected outputs come from running the deserialized bytes, i.e. exactly what is frozen.
    Returns the metadata written.
    """
    with spec_config(spec):
        exported = export_spec(spec)
        serialized = bytes(exported.serialize())
        inputs = spec.make_inputs()
        outputs = jax.tree.leaves(jax.export.deserialize(serialized).call(*inputs))
        metadata = _metadata(spec, exported)
        bad_inputs = spec.make_bad_inputs() if spec.make_bad_inputs else None
    storage.write(directory, serialized=serialized, metadata=metadata, inputs=inputs,
                  expected=[np.asarray(o) for o in outputs], bad_inputs=bad_inputs)
    return metadata


def generate(specs: Sequence[ArtifactSpec], data_dir: pathlib.Path, *, force: bool = False,
             log: Callable[[str], None] = print) -> list[str]:
    """Writes the artifacts for `specs` under `data_dir`; returns the names written.

    Example:
        >>> generate(artifacts.select(["stablehlo_sort"]), storage.DEFAULT_DATA_DIR)
    """
    written = []
    for i, spec in enumerate(specs, 1):
        directory = data_dir / spec.name
        prefix = f"[{i}/{len(specs)}] {spec.name}:"
        if storage.exists(directory) and not force:
            log(f"{prefix} exists, kept (old artifacts are the point; --force rewrites it)")
            continue
        metadata = generate_one(spec, directory)
        targets = ", ".join(metadata["custom_call_targets"]) or "none"
        log(f"{prefix} written (calling convention {metadata['calling_convention_version']}, "
            f"custom calls: {targets})")
        written.append(spec.name)
    return written
