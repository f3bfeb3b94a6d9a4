"""The comparisons of one program's results with `jax.jit`'s, under the contract
(`tf_ops.exactness`), and the measurements that size its bounds."""
from __future__ import annotations

import dataclasses

import numpy as np

from tf_ops import exactness
from tools.lax_fuzz.program import Program

CHECKS = ("value", "jvp", "grad1", "grad2")


@dataclasses.dataclass
class Mismatch:
    """One result that differs from `jax.jit`'s beyond the contract."""
    path: str
    check: str
    output: int
    kind: str
    dtype: str
    families: tuple
    detail: str
    got: str = ""
    want: str = ""
    scale: str = ""  # the magnitude companion at the element `got`/`want` are from, if any

    def coarse(self) -> tuple:
        return (self.path, self.check, self.kind, self.dtype)


def family_key(families) -> str:
    return "+".join(sorted(families)) or "exact"


def compare_results(program: Program, path: str, check: str, got: list, want: list,
                    scale, stats: dict) -> list[Mismatch]:
    """Compares the results of one check; adds the measurements to `stats` (keyed by path,
    check and family: count, differing results, largest ulps, scaled and bound use).
    `scale`: for "value", the results' magnitude companions (None: none); for a derivative
    check, the largest term of the reference computation (`scales.largest_term`)."""
    found = []
    if check == "value":
        bounds = [(exactness.tolerance(*o.families), o.families, o.dtype) for o in program.outputs]
        scales = scale or [None] * len(got)
    else:
        bounds = [(exactness.tolerance("derivative"), ("derivative",), np.asarray(w).dtype.name)
                  for w in want]
        scales = [max(_norm(w), scale or 0.0) for w in want]
    for i, (g, w) in enumerate(zip(got, want)):
        bound, families, dtype = bounds[i]
        g, w = np.asarray(g), np.asarray(w)
        result = exactness.compare(g, w, bound, scales[i])
        _measure(stats, path, check, family_key(families), result)
        if not result.passed:
            found.append(Mismatch(path, check, i, result.kind, dtype, tuple(families),
                                  result.detail, repr(result.got), repr(result.want),
                                  _scale_at(scales[i] if check == "value" else None,
                                            result.index)))
    return found


def _scale_at(scale, index: tuple) -> str:
    """The magnitude companion at the differing element (the comparison's `index`): it tells
    an overflowed product from a NaN input (known.py), which the values alone may not."""
    if scale is None:
        return ""
    try:
        return repr(float(np.abs(np.asarray(scale)[index])))
    except (IndexError, TypeError, ValueError):
        return ""


def _norm(want) -> float:
    """A derivative's scale: the largest finite magnitude in the expected array."""
    w = np.abs(np.asarray(want).astype(np.complex128 if np.iscomplexobj(want) else np.float64))
    finite = w[np.isfinite(w)]
    return float(finite.max()) if finite.size else 0.0


def _measure(stats: dict, path: str, check: str, family: str, result) -> None:
    entry = stats.setdefault(f"{path}|{check}|{family}", {
        "results": 0, "differing": 0, "max_ulps": 0.0, "max_scaled": 0.0, "max_use": 0.0})
    entry["results"] += 1
    entry["differing"] += int(result.max_abs_error > 0)
    for key in ("max_ulps", "max_scaled", "max_use"):
        value = getattr(result, key)
        entry[key] = max(entry[key], value if np.isfinite(value) else 1e300)


def merge_stats(total: dict, part: dict) -> None:
    for key, entry in part.items():
        into = total.setdefault(key, dict.fromkeys(entry, 0))
        for name, value in entry.items():
            into[name] = into[name] + value if name in ("results", "differing") \
                else max(into[name], value)
