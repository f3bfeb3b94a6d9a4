"""Issues 7 and 15's speed targets, checked against the report rows (never in tests).

  forward     ours/JAX <= 1.05 for forward rows at batch 256
  inference   default convert <= 1.05x with_gradient=False (tf.function, every forward workload)
  inference   with jit_compile: default convert <= 1.02x jax2tf
  gradient    default ours/JAX <= 1.10 in a tf.function without jit_compile, <= 1.05 with jit_compile
  dispatch    ours eager <= 1.5x ours tf.function (tiny function)
  conversion  ours <= 1.05x jax2tf for every conversion row of the default options
  serving     a loaded `saved_model_tools.save()` signature <= the peer's recipe (b1, b64)
  save time   `saved_model_tools.save()` (references and warmup records included) <= 1.05x
              the peer's recipe
  vs peer     ours <= jax2tf on every row that has both (rows marked "proposed" excluded)

Each check records the value, the limit, whether it is met, and whether the miss is within this
run's noise. Ours vs jax2tf uses the per-round ratio where the row has one (both timed in the
same rounds, `rows.paired`): its median is the value, and a miss is within noise when the
limit lies inside its p10-p90. Otherwise the ratio of medians, within noise when the two
p10-p90 ranges overlap.
"""
from __future__ import annotations

from benchmarks import rows as rows_lib

FORWARD_LIMIT = 1.05
DEFAULT_OVER_NO_GRADIENT_LIMIT = 1.05
JIT_OVER_PEER_LIMIT = 1.02
GRADIENT_LIMITS = {"tf.function": 1.10, "tf.function jit_compile": 1.05}
CONVERSION_LIMIT = 1.05
SERVED_LIMIT = 1.0
SAVE_TIME_LIMIT = 1.05
SAVE_LABEL = "ours save()"
DEFAULT_LABEL = "ours (default)"
NO_GRADIENT_LABEL = "ours (with_gradient=False)"
EAGER_OVER_GRAPH_LIMIT = 1.5


def _check(target: str, row: dict, value: float, limit: float, noise: bool) -> dict:
    return {"target": target, "workload": row["workload"], "setting": row["setting"],
            "ours": row["labels"]["ours"], "value": value, "limit": limit,
            "met": value <= limit, "within_noise": noise}


def _vs_peer(row: dict, limit: float) -> tuple[float, bool]:
    """(ours/peer value, whether a miss of `limit` is within noise) for a row."""
    paired = (row.get("paired") or {}).get("ours/peer")
    if paired is not None:
        return paired["median"], paired["p10"] <= limit
    return row["ratios"]["ours/peer"], rows_lib.overlaps(row["ours"], row["peer"])


def evaluate(sections: list[dict]) -> list[dict]:
    """All target checks for the rows of `sections` (those present).

    Example:
        >>> evaluate([])
        []
    """
    by_group = {s["group"]: s["rows"] for s in sections}
    checks = []
    for row in by_group.get("forward", []):
        if row["workload"].endswith(" b256"):
            checks.append(_check(f"forward ours/JAX <= {FORWARD_LIMIT}", row,
                                 row["ratios"]["ours/jax"], FORWARD_LIMIT,
                                 rows_lib.overlaps(row["ours"], row["jax"])))
    forward_by_label = {(r["workload"], r["setting"], r["labels"]["ours"]): r
                        for r in by_group.get("forward", [])}
    for (workload, setting, label), row in forward_by_label.items():
        if label == DEFAULT_LABEL:
            bare = forward_by_label.get((workload, setting, NO_GRADIENT_LABEL))
            if bare is not None:
                checks.append(_check(
                    f"inference: default / with_gradient=False <= "
                    f"{DEFAULT_OVER_NO_GRADIENT_LIMIT}", row,
                    row["ours"]["median"] / bare["ours"]["median"],
                    DEFAULT_OVER_NO_GRADIENT_LIMIT, rows_lib.overlaps(row["ours"], bare["ours"])))
        if label == DEFAULT_LABEL + " jit_compile":
            value, noise = _vs_peer(row, JIT_OVER_PEER_LIMIT)
            checks.append(_check(f"inference jit_compile: default / jax2tf <= "
                                 f"{JIT_OVER_PEER_LIMIT}", row, value, JIT_OVER_PEER_LIMIT, noise))
    for row in by_group.get("gradient", []):
        if not row["labels"]["ours"].startswith(DEFAULT_LABEL):
            continue
        limit = GRADIENT_LIMITS[row["setting"]]
        checks.append(_check(f"training step (default) ours/JAX <= {limit} "
                             f"({row['setting']})", row, row["ratios"]["ours/jax"], limit,
                             rows_lib.overlaps(row["ours"], row["jax"])))
    dispatch = {r["setting"]: r for r in by_group.get("dispatch", [])}
    if "eager" in dispatch and "tf.function" in dispatch:
        eager, graph = dispatch["eager"], dispatch["tf.function"]
        checks.append(_check(f"tiny call: ours eager / ours tf.function <= "
                             f"{EAGER_OVER_GRAPH_LIMIT}", eager,
                             eager["ours"]["median"] / graph["ours"]["median"],
                             EAGER_OVER_GRAPH_LIMIT, rows_lib.overlaps(eager["ours"],
                                                                       graph["ours"])))
    for row in by_group.get("conversion", []):
        if row["labels"]["ours"] == DEFAULT_LABEL:
            value, noise = _vs_peer(row, CONVERSION_LIMIT)
            checks.append(_check(f"conversion ours <= {CONVERSION_LIMIT}x jax2tf", row,
                                 value, CONVERSION_LIMIT, noise))
    for row in by_group.get("savedmodel", []):
        if row["labels"]["ours"] != SAVE_LABEL:
            continue
        if row["setting"].startswith("served"):
            target, limit = f"served latency: save() <= {SERVED_LIMIT}x jax2tf recipe", SERVED_LIMIT
        elif row["setting"] == "save time":
            target, limit = f"save time: save() <= {SAVE_TIME_LIMIT}x jax2tf recipe", SAVE_TIME_LIMIT
        else:
            continue
        value, noise = _vs_peer(row, limit)
        checks.append(_check(target, row, value, limit, noise))
    for section in sections:
        for row in section["rows"]:
            if row["ratios"]["ours/peer"] is None or "proposed" in row["note"]:
                continue
            value, noise = _vs_peer(row, 1.0)
            checks.append(_check("every row: ours <= jax2tf", row, value, 1.0,
                                 noise and row["unit"] != "bytes"))
    return checks


def summary(checks: list[dict]) -> dict[str, dict]:
    """{target: {"met": n, "total": n, "missed_within_noise": n}}."""
    out: dict[str, dict] = {}
    for c in checks:
        s = out.setdefault(c["target"], {"met": 0, "total": 0, "missed_within_noise": 0})
        s["total"] += 1
        s["met"] += c["met"]
        s["missed_within_noise"] += (not c["met"]) and c["within_noise"]
    return out
