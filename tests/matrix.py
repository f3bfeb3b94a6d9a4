"""Which cases of a large matrix CI runs, and which only the full matrix runs.

The linear-algebra checks repeat each case in four dtypes and, for back-compat artifacts,
eagerly and under `jit_compile`; every repetition is an XLA compile of a large module, the
suite's largest CPU cost. CI (`python -m pytest`) runs a slice: every primitive and LAPACK
target in at least one dtype, real and complex in turn across them, and the eager run of every
artifact; the cases marked `full_matrix` are deselected there (pytest's summary counts them).
`python -m tools.full_matrix` runs every case and commits its result to
tools/results/full_matrix/, which a CI test holds to the sources and the JAX and TF versions it
ran on: a change to a linear-algebra lowering cannot land without the full matrix.

Example:
    >>> [p.id for p in dtype_params(["a", "b"], ["f32", "f64"]) if not p.marks]
    ['f32']
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

FULL_MATRIX = pytest.mark.full_matrix
# The default slice: single-precision real and double-precision complex (both kinds, both
# precisions).
CI_DTYPES = ("f32", "c128")


def in_ci(*values, id: str, ci: bool):
    """`pytest.param(*values, id=id)`, marked `full_matrix` unless `ci`."""
    return pytest.param(*values, id=id, marks=() if ci else FULL_MATRIX)


def dtype_params(dtypes: Sequence, ids: Sequence[str], ci: Iterable[str] = CI_DTYPES) -> list:
    """One param per dtype; those whose id is not in `ci` only in the full matrix."""
    ci = set(ci)
    return [in_ci(d, id=i, ci=i in ci) for d, i in zip(dtypes, ids)]
