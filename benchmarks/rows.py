"""One row of the benchmark report: a setting of a workload, JAX vs jax2tf (the peer) vs ours.

Every workload module returns a `section(...)` holding rows; the runner writes them to
`results/latest.json`, `benchmarks.report` renders them and `benchmarks.targets` checks them.
Statistics are unit-agnostic ({"median", "p10", "p90", "n"}, lower is better), so seconds and
directory bytes share one shape.
"""
from __future__ import annotations

from typing import Any

from benchmarks import harness

SIDES = ("jax", "peer", "ours")


def from_harness(stats: dict) -> dict:
    """`harness.interleaved` statistics (seconds) as row statistics.

    Example:
        >>> from_harness({"median_s": 2.0, "p10_s": 1.0, "p90_s": 3.0, "n": 5})
        {'median': 2.0, 'p10': 1.0, 'p90': 3.0, 'n': 5}
    """
    out = {"median": stats["median_s"], "p10": stats["p10_s"], "p90": stats["p90_s"],
           "n": stats["n"]}
    if "samples_s" in stats:
        out["samples"] = stats["samples_s"]
    return out


def single(value: float) -> dict:
    """Statistics of one exact value (e.g. a directory size)."""
    return {"median": float(value), "p10": float(value), "p90": float(value), "n": 1}


def row(workload: str, setting: str, *, ours: dict, ours_label: str, jax: dict | None = None,
        jax_label: str | None = None, peer: dict | None = None, peer_label: str | None = None,
        unit: str = "s", note: str = "") -> dict:
    """A report row; ratios are of medians, None where a side is missing.

    Example:
        >>> r = row("mlp b256", "tf.function", ours=single(1.1), ours_label="ours",
        ...         jax=single(1.0), jax_label="jax.jit")
        >>> round(r["ratios"]["ours/jax"], 2)
        1.1
    """
    stats = {"jax": jax, "peer": peer, "ours": ours}
    ratio = lambda a, b: (stats[a]["median"] / stats[b]["median"]
                          if stats[a] is not None and stats[b] is not None and stats[b]["median"]
                          else None)
    return {
        "workload": workload, "setting": setting, "unit": unit, "note": note,
        "labels": {"jax": jax_label, "peer": peer_label, "ours": ours_label},
        **stats,
        "ratios": {"ours/jax": ratio("ours", "jax"), "peer/jax": ratio("peer", "jax"),
                   "ours/peer": ratio("ours", "peer")},
        "paired": {"ours/jax": paired(ours, jax), "ours/peer": paired(ours, peer)},
    }


def paired(a: dict | None, b: dict | None) -> dict | None:
    """Median and p10-p90 of the per-round ratios a/b, when both sides were timed in the same
    rounds (`harness.interleaved`): a load change between rounds hits both sides of a round
    alike and cancels in its ratio, so this spread is the comparison's own noise.

    Example:
        >>> paired({"samples": [2.0, 4.0, 3.0]}, {"samples": [1.0, 2.0, 3.0]})["median"]
        2.0
    """
    sa, sb = (a or {}).get("samples"), (b or {}).get("samples")
    if not sa or not sb or len(sa) != len(sb):
        return None
    ratios = harness.paired_ratios(sa, sb)
    return harness.spread(ratios) if ratios else None


def section(group: str, title: str, description: str, rows: list[dict],
            details: dict[str, Any] | None = None) -> dict:
    """A group of rows with the text the report prints above them."""
    return {"group": group, "title": title, "description": description, "rows": rows,
            "details": details or {}}


def overlaps(a: dict | None, b: dict | None) -> bool:
    """Whether two p10-p90 ranges overlap (the difference is within the run's noise)."""
    return a is not None and b is not None and a["p10"] <= b["p90"] and b["p10"] <= a["p90"]
