"""Renders benchmark results: a markdown report (tables of medians, spreads and ratios) and an
optional PNG plot of the ratios (needs matplotlib: `pip install matplotlib`)."""
from __future__ import annotations

from pathlib import Path

from benchmarks import report_plot
from benchmarks import targets as targets_lib

RATIO_COLUMNS = (("ours/jax", "ours/JAX"), ("peer/jax", "jax2tf/JAX"), ("ours/peer", "ours/jax2tf"))


def fmt_value(value: float, unit: str) -> str:
    """A number with a readable unit.

    Example:
        >>> fmt_value(0.0123, "s"), fmt_value(2.5e6, "bytes")
        ('12.3 ms', '2.5 MB')
    """
    if unit == "bytes":
        for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if value >= scale:
                return f"{value / scale:.3g} {name}"
        return f"{value:.0f} B"
    for scale, name in ((1.0, "s"), (1e-3, "ms")):
        if value >= scale:
            return f"{value / scale:.3g} {name}"
    return f"{value * 1e6:.3g} µs"


def fmt_stats(stats: dict | None, unit: str) -> str:
    """"median (p10-p90)", or "-" when absent."""
    if stats is None:
        return "-"
    if stats["n"] == 1 or stats["p10"] == stats["p90"]:
        return fmt_value(stats["median"], unit)
    return (f"{fmt_value(stats['median'], unit)} "
            f"({fmt_value(stats['p10'], unit)}–{fmt_value(stats['p90'], unit)})")


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def fmt_paired(stats: dict | None) -> str:
    """A per-round ratio "median (p10-p90)", or "-".

    Example:
        >>> fmt_paired({"median": 1.01, "p10": 0.97, "p90": 1.05, "n": 30})
        '1.01 (0.97–1.05)'
    """
    if stats is None:
        return "-"
    return f"{stats['median']:.2f} ({stats['p10']:.2f}–{stats['p90']:.2f})"


MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def section_markdown(section: dict) -> str:
    """One section: title, description and its table (row notes as numbered footnotes)."""
    notes = list(dict.fromkeys(row["note"] for row in section["rows"] if row["note"]))
    mark = lambda note: f" {MARKS[notes.index(note)]}" if note else ""
    lines = [f"## {section['title']}", "", section["description"], "",
             "| workload | setting | ours | JAX | jax2tf | ours | "
             + " | ".join(title for _, title in RATIO_COLUMNS) + " | ours/jax2tf per round |",
             "|---|---|---|---|---|---|" + "---:|" * (len(RATIO_COLUMNS) + 1)]
    for row in section["rows"]:
        unit = row["unit"]
        lines.append(
            f"| {row['workload']} | {row['setting']} | {row['labels']['ours']}"
            f"{mark(row['note'])} | {fmt_stats(row['jax'], unit)} | "
            f"{fmt_stats(row['peer'], unit)} | {fmt_stats(row['ours'], unit)} | "
            + " | ".join(fmt_ratio(row["ratios"][key]) for key, _ in RATIO_COLUMNS)
            + f" | {fmt_paired((row.get('paired') or {}).get('ours/peer'))} |")
    if notes:
        lines += [""] + [f"{MARKS[i]} {note}." for i, note in enumerate(notes)]
    return "\n".join(lines) + "\n"


def targets_markdown(checks: list[dict]) -> str:
    """The target summary and every missed check."""
    lines = ["## Targets (ours vs JAX native and vs jax2tf)", "",
             "| target | met | missed, within noise* |", "|---|---:|---:|"]
    for target, s in targets_lib.summary(checks).items():
        lines.append(f"| {target} | {s['met']} / {s['total']} | {s['missed_within_noise']} |")
    missed = [c for c in checks if not c["met"]]
    if missed:
        lines += ["", "Missed:", "",
                  "| target | workload | setting | ours | value | limit | within noise* |",
                  "|---|---|---|---|---:|---:|---|"]
        for c in missed:
            lines.append(f"| {c['target']} | {c['workload']} | {c['setting']} | {c['ours']} | "
                         f"{c['value']:.2f} | {c['limit']} | "
                         f"{'yes' if c['within_noise'] else 'no'} |")
    lines += ["", "\\* the compared p10–p90 ranges overlap (for ours vs jax2tf: the limit is within "
                  "the p10–p90 of the per-round ratios): the miss is within this run's noise."]
    return "\n".join(lines) + "\n"


def _load(env: dict) -> str:
    load = env.get("load_average")
    if not load:
        return ""
    return f" (load average 1/5/15 min at the end: {', '.join(f'{x:.1f}' for x in load)})"


def markdown(result: dict) -> str:
    """The whole report: environment, targets, then every section."""
    env = result["environment"]
    head = [f"# Benchmarks: JAX native vs jax2tf vs jax2tf-native ({result['mode']} run)", "",
            f"jax {env['jax']}, tensorflow {env['tensorflow']}, python {env['python']}, "
            f"{env['machine']}, {env['cpus']} CPUs{_load(env)}; {result['duration_s']:.0f} s; "
            f"one process, "
            f"candidates interleaved round by round, in an order that changes every round; median "
            f"(p10–p90); ratios of medians, and ours/jax2tf per round: the median (p10–p90) of "
            f"the ratios within each round (the targets use it where a row has it); lower "
            f"is better. Command: `{result['command']}`.", ""]
    parts = ["\n".join(head), targets_markdown(result["targets"])]
    parts += [section_markdown(s) for s in result["sections"]]
    return "\n".join(parts)


def plot(result: dict, path: str | Path) -> Path | None:
    """The plot of the ratios (`report_plot`: a panel per workload, default options).

    Returns the PNG path, or None (with the reason printed) when matplotlib is not installed.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("report: matplotlib is not installed, no plot written "
              "(pip install matplotlib, or the package's `bench` extra).")
        return None
    return report_plot.render(result, path)


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.report [results/latest.json]`: re-renders latest.md and latest.png
    next to the JSON (no measuring) and prints the targets table."""
    import argparse
    import json
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("json", nargs="?", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "latest.json")
    args = parser.parse_args(argv)
    result = json.loads(args.json.read_text())
    args.json.with_suffix(".md").write_text(markdown(result))
    plot(result, args.json.with_suffix(".png"))
    print(targets_markdown(result["targets"]))


if __name__ == "__main__":
    main()
