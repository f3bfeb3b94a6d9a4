"""The oldest TF that runs a module: the rule applied to the measured matrix
(`tf_version_matrix`), for one module (`tf_support`) and for a whole model (`combined_support`).
"""
from __future__ import annotations

from typing import Sequence

from saved_model_tools.inspect.report import CustomCallReport, TfSupport
from saved_model_tools.inspect.tf_version_matrix import TF_VERSION_MATRIX_FILE, version_tuple
from tf_ops import versions

# The oldest calling convention TF's XlaCallModule kernel accepts: one definition, in tf_ops.
_MIN_CALLING_CONVENTION = versions.TF_MINIMUM_CALLING_CONVENTION_VERSION


def _tf_blockers(info: dict, calling_convention: int, stablehlo_version: str | None) -> list[str]:
    reasons = []
    if calling_convention > info["max_calling_convention"]:
        reasons.append(f"runs calling conventions <= {info['max_calling_convention']}, the "
                       f"module uses {calling_convention}")
    if stablehlo_version is not None:
        have = version_tuple(stablehlo_version)
        if have > version_tuple(info["stablehlo_current"]):
            reasons.append(f"reads StableHLO <= {info['stablehlo_current']}, the module is "
                           f"{stablehlo_version}")
        elif have < version_tuple(info["stablehlo_minimum"]):
            reasons.append(f"reads StableHLO >= {info['stablehlo_minimum']}, the module is "
                           f"{stablehlo_version}")
    return reasons


def tf_support(calling_convention: int, stablehlo_version: str | None,
               custom_calls: Sequence[CustomCallReport], matrix: dict | None) -> TfSupport:
    """The oldest TF version of the matrix that runs a module with these properties.

    The rule is conservative: a TF version qualifies when it runs the calling convention and
    reads the StableHLO version of the header (TF may still read newer artifacts whose ops all
    exist in its version, but nothing guarantees it), and every custom call runs in TF.

    Example:
        >>> from saved_model_tools.inspect.tf_version_matrix import load_tf_version_matrix
        >>> tf_support(10, "1.13.7", (), load_tf_version_matrix()).oldest_tf
        '2.21'
    """
    if matrix is None:
        return TfSupport(None, f"no TF version matrix at {TF_VERSION_MATRIX_FILE}; run "
                               f"tools/tf_version_matrix.py to measure one")
    not_in_tf = [c.target for c in custom_calls if not c.runs_in_tf]
    if calling_convention < _MIN_CALLING_CONVENTION:
        return TfSupport(None, f"calling convention {calling_convention} is older than any TF "
                               f"runs (>= {_MIN_CALLING_CONVENTION})")
    ordered = sorted(matrix, key=version_tuple)
    by_version = {}
    for version in ordered:
        reasons = _tf_blockers(matrix[version], calling_convention, stablehlo_version)
        if not_in_tf:
            reasons.append(f"custom calls TF's XLA cannot run: {', '.join(not_in_tf)}")
        by_version[version] = "; ".join(reasons) or None
    oldest = None
    for version in reversed(ordered):  # the oldest from which every newer version works
        if by_version[version] is not None:
            break
        oldest = version
    if oldest is None:
        newest = ordered[-1]
        return TfSupport(None, f"no TF in the matrix ({ordered[0]}..{newest}) qualifies; TF "
                               f"{newest}: {by_version[newest]}", by_version)
    index = ordered.index(oldest)
    if index == 0:
        reason = f"every TF in the matrix ({ordered[0]}..{ordered[-1]}) qualifies"
    else:
        previous = ordered[index - 1]
        reason = f"TF {previous} {by_version[previous]}"
        if "StableHLO" in by_version[previous]:
            # target_tf is what the guide (docs/guides/target_tf.md) recommends: it also applies
            # that TF's feature rewrites, which a bare stablehlo_version does not.
            reason += (f"; for TF {previous}, export with --target-tf {previous} "
                       f"(target_tf={previous!r} in save / convert)")
    if stablehlo_version is None:
        reason += " (StableHLO version unknown: only the calling convention was checked)"
    return TfSupport(oldest, reason, by_version)


def combined_support(supports: Sequence[TfSupport]) -> TfSupport:
    """The TF support of a model from its modules': the newest of their oldest TF versions;
    unknown when any module's is."""
    if not supports:
        return TfSupport(None, "the model has no XlaCallModule op: any TF that reads the "
                               "SavedModel format runs it (nothing to check here)")
    if any(s.oldest_tf is None for s in supports):
        worst = next(s for s in supports if s.oldest_tf is None)
        return TfSupport(None, worst.reason, worst.by_version)
    newest = max(supports, key=lambda s: version_tuple(s.oldest_tf))
    return newest
