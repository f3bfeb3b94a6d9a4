"""The summary of a run (`summary.md` and `bounds.json` in its directory), from its JSON
lines: throughput, mismatches by class (known and unexplained) with a reproducer each,
refusals, and the measured differences per path, check and op family that size the
contract's bounds (tf_ops/exactness.py)."""
from __future__ import annotations

import collections
import json
import re
from pathlib import Path

from tf_ops import exactness
from tools.lax_fuzz import check as check_lib
from tools import lowering_version
from tools.lax_fuzz import known, worker


def aggregate(records: list[dict]) -> dict:
    classes: dict[str, dict] = {}
    stats: dict = {}
    refused = collections.Counter()
    totals = collections.Counter()
    first_at = {}
    records = sorted(records, key=lambda r: r["batch"])
    seen_programs = 0
    for r in records:
        totals["batches"] += 1
        totals["failed_batches"] += bool(r.get("failed"))
        totals["programs"] += r["programs"]
        totals["skipped"] += r.get("skipped", 0)
        totals["symbolic"] += r.get("symbolic_programs", 0)
        totals["derivative"] += r.get("derivative_programs", 0)
        totals["x64_batches"] += bool(r.get("x64"))
        totals["cpu_seconds"] += r.get("cpu_seconds", 0.0)
        totals["wall_seconds"] += r.get("wall_seconds", 0.0)
        seen_programs += r["programs"]
        check_lib.merge_stats(stats, r.get("stats", {}))
        totals.update({"op " + k: v for k, v in r.get("ops", {}).items()})
        for x in r.get("refused", ()):
            refused[(x["path"], x["detail"].split(" at ")[0][:140])] += 1
        for f in r.get("findings", ()):
            _reclassify(f, r.get("process_started", 0.0), (r.get("seed"), r["batch"]))
            entry = classes.setdefault(f["class"], {
                "known": f["known"], "group": f.get("group", ""), "count": 0, "paths": collections.Counter(),
                "checks": collections.Counter(), "reproducer": None, "detail": f["detail"],
                "confirmed": 0})
            entry["count"] += 1
            entry["paths"][f["path"]] += 1
            entry["checks"][f["check"]] += 1
            entry["confirmed"] += bool(f.get("confirmed"))
            if f.get("reproducer") and not entry["reproducer"]:
                entry["reproducer"], entry["detail"] = f["reproducer"], f["detail"]
            first_at.setdefault(f["class"], seen_programs)
    for name, entry in classes.items():
        entry["first_after_programs"] = first_at[name]
    return {"totals": dict(totals), "classes": classes, "stats": stats,
            "refused": refused}


def _reclassify(f: dict, recorded: float, where: tuple = (None, None)) -> None:
    """Classifies a finding with today's lists (`known.KNOWN`, `known.TF_XLA`): a class fixed
    and dropped from them since the run counts as unexplained, unless `known.FIXED` says the
    fix came after the worker that found it started (`recorded`, unix time; 0 for records
    that do not say)."""
    if f.get("program") is None:  # a worker crash or hang, explained when rerun (known.CRASHES)
        reason = known.CRASHES.get(tuple(where))
        f["known"] = reason is not None
        if reason is not None:
            f.update({"class": "worker crash, not in a converted path: " + reason,
                      "group": "tf_xla"})
        return
    got, want = f.get("got"), f.get("want")
    if not got:  # records before the finding kept them: the detail's first elements
        found = re.search(r"got (\S+), expected (\S+?)(?: \(|$|;)", f["detail"])
        got, want = (found.group(1), found.group(2)) if found else ("", "")
    m = check_lib.Mismatch(f["path"], f["check"], 0, f["kind"], f["dtype"],
                           tuple(f.get("families", ())), f["detail"], got, want,
                           f.get("scale", ""))
    ops = set(f.get("shrunk_ops") or f["ops"])
    name = known.classify(m, ops)
    if name is None and m.path == "plain":
        fixed = next((k for k, when, _ in known.FIXED if recorded < when and k.matches(m, ops)),
                     None)
        if fixed is not None:
            f.update({"class": "fixed during the run: " + fixed.name, "known": True,
                      "group": "fixed"})
            return
    f["known"] = name is not None
    if name is not None:
        f["class"] = name
        f["group"] = "tf_xla" if name in {k.name for k in known.TF_XLA} else "plain"


def _bounds_rows(stats: dict) -> list[str]:
    rows = ["| path | check | family | results | differing | max ulps | max scaled | "
            "bound use |", "|---|---|---|---|---|---|---|---|"]
    for key in sorted(stats):
        path, check, family = key.split("|")
        e = stats[key]
        rows.append(f"| {path} | {check} | {family} | {e['results']} | {e['differing']} | "
                    f"{_num(e['max_ulps'])} | {_num(e['max_scaled'])} | {_num(e['max_use'])} |")
    return rows


def _num(x: float) -> str:
    return "inf" if x >= 1e300 else f"{x:.3g}"


def _lowering_line(records: list[dict]) -> str:
    return lowering_version.describe(records, "batch")


def write(out_dir: Path, title: str | None = None) -> dict:
    """Writes `summary.md` and `bounds.json`; returns the aggregate."""
    out_dir = Path(out_dir)
    records = worker.read_records(out_dir)
    agg = aggregate(records)
    config = {}
    if (out_dir / "config.json").exists():
        config = json.loads((out_dir / "config.json").read_text())
    t = agg["totals"]
    unexplained = {n: e for n, e in agg["classes"].items() if not e["known"]}
    known_classes = {n: e for n, e in agg["classes"].items()
                     if e["known"] and e["group"] not in ("tf_xla", "fixed")}
    fixed = {n: e for n, e in agg["classes"].items() if e["group"] == "fixed"}
    tf_xla = {n: e for n, e in agg["classes"].items() if e["group"] == "tf_xla"}
    cpu = t.get("cpu_seconds", 0.0)
    # From the first batch's start to the last one's end (a resumed run's pause included).
    timed = [r for r in records if r.get("time") and not r.get("failed")]
    elapsed = (max(r["time"] for r in timed)
               - min(r["time"] - r.get("wall_seconds", 0.0) for r in timed)) if timed else 0.0
    requested = config.get("programs")
    lines = [f"# {title or 'Differential fuzz run'}", "",
             f"Generated by `{config.get('command', 'python -m tools.lax_fuzz run')}` "
             f"(seed {config.get('seed')}); `python -m tools.lax_fuzz summary --out "
             f"{out_dir}` rewrites this page from the run's JSON lines.", "",
             f"- programs: {t.get('programs', 0)} in {t.get('batches', 0)} batches "
             f"({t.get('x64_batches', 0)} under x64); with symbolic dimensions: "
             f"{t.get('symbolic', 0)}; with jvp and gradient checks: {t.get('derivative', 0)}; "
             f"not run by JAX itself: {t.get('skipped', 0)}",
             f"- time: {cpu / 3600:.2f} CPU hours, {t.get('wall_seconds', 0.0) / 3600:.2f} "
             f"worker hours; {t.get('programs', 0) / max(cpu, 1e-9):.2f} programs per CPU "
             f"second",
             f"- wall clock: {elapsed / 3600:.2f} hours from the first batch's start to the "
             f"last one's end; "
             f"{t.get('programs', 0) / max(elapsed, 1e-9):.2f} programs per second"
             if elapsed else "- wall clock: no batch recorded",
             *([f"- **partial run**: {t.get('programs', 0)} of the {requested} programs "
                f"requested; the same command resumes it (it skips the batches recorded)"]
               if requested and t.get("programs", 0) + t.get("skipped", 0) < requested
               else []),
             f"- mismatch classes: {len(agg['classes'])} ({len(unexplained)} unexplained, "
             f"{len(known_classes)} known in the plain lowering, {len(tf_xla)} of TF's XLA); "
             f"findings: "
             f"{sum(e['count'] for e in agg['classes'].values())}",
             f"- refused at conversion (our `PlainLoweringError`): "
             f"{sum(agg['refused'].values())} program runs",
             _lowering_line(timed), ""]
    for heading, group in (("Unexplained", unexplained),
                           ("Known in the plain lowering (tools/lax_fuzz/known.py KNOWN)",
                            known_classes),
                           ("TF's XLA differs from jaxlib's, or jaxlib's XLA fails "
                            "(known.py TF_XLA, CRASHES)", tf_xla),
                           ("Fixed during the run (known.py FIXED; found before the fix)",
                            fixed)):
        lines += [f"## {heading}", ""]
        if not group:
            lines += ["None.", ""]
            continue
        lines += ["| class | findings | paths | checks | first after (programs) | "
                  "reproducer | detail |", "|---|---|---|---|---|---|---|"]
        for name, e in sorted(group.items(), key=lambda kv: -kv[1]["count"]):
            repro = f"[{Path(e['reproducer']).name}]({e['reproducer']})" if e["reproducer"] \
                else "-"
            lines.append(f"| {name} | {e['count']} | {_counter(e['paths'])} | "
                         f"{_counter(e['checks'])} | {e['first_after_programs']} | {repro} | "
                         f"{_cell(e['detail'])} |")
        lines.append("")
    lines += ["## Refused at conversion", ""]
    if agg["refused"]:
        lines += ["| path | refusal | program runs |", "|---|---|---|"]
        for (path, detail), n in agg["refused"].most_common(30):
            lines.append(f"| {path} | {_cell(detail)} | {n} |")
    else:
        lines.append("None.")
    ops = sorted(((k[3:], v) for k, v in t.items() if k.startswith("op ")), key=lambda kv: -kv[1])
    lines += ["", "## Ops drawn", "", f"{len(ops)} kinds: " + ", ".join(f"{k} {v}" for k, v in ops)]
    lines += ["", "## Measured differences from jax.jit", "",
              "Per path, check and tolerated family (exactness.TOLERANCES; `exact`: none): "
              "results compared, results with any difference, the largest difference in ulps "
              "of the expected value, the largest in units of eps * scale, and the largest "
              "fraction of the contract's bound used (over 1: a mismatch).", ""]
    lines += _bounds_rows(agg["stats"]) + [""]
    (out_dir / "summary.md").write_text("\n".join(lines))
    (out_dir / "bounds.json").write_text(json.dumps(agg["stats"], indent=1, sort_keys=True))
    return agg


def _counter(c) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:160]


def contract_rows() -> list[str]:
    """The tolerated differences as table rows (for docs/exactness.md's check)."""
    return [f"| `{name}` | {t.bound} | {t.reason} |"
            for name, t in exactness.TOLERANCES.items()]
