"""The benchmark plot (`latest.png`): one small panel per workload, readable at page width.

Each panel holds at most `MAX_BARS` horizontal bars: per workload row, ours next to jax2tf,
each as time relative to `jax.jit` (lower is better; 1 = as fast as JAX). Only the default
options are drawn (`ours (default)`, `ours save()`); the variants (`with_gradient=False`,
`gradient_argnums=0`, `gradient_mode="recompute"`, `save(jit_compile=False)`) are in the
run's tables (latest.md). `panels` chooses what is drawn (no matplotlib needed, tested);
`render` draws it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

MAX_BARS = 12
OURS_COLOR, PEER_COLOR = "#3f51b5", "#ff9800"
# The ours label of the default options, per section group.
_DEFAULT_OURS = {"ours (default)", "ours (default) jit_compile", "ours save()", "ours eager",
                 "ours tf.function"}


@dataclasses.dataclass
class Panel:
    """One panel of the plot.

    Attributes:
      title: what the panel measures.
      labels: one per bar pair, top to bottom ("MLP, batch 256").
      series: [(legend name, one value per label or None)]: the bars of each label.
      xlabel: what the values are.
      log_scale: values spanning more than ~10x (the eager call of the peer) are drawn on a
        log scale.
    """
    title: str
    labels: list[str]
    series: list[tuple[str, list[float | None]]]
    xlabel: str = "time / jax.jit  (lower is better)"
    log_scale: bool = False

    @property
    def bars(self) -> int:
        return sum(1 for _, values in self.series for v in values if v is not None)


def _workload(name: str) -> str:
    """"mlp b256" -> "MLP b256", "transformer b8" -> "Transformer b8"; others stay."""
    model, _, batch = name.partition(" ")
    return f"{model.upper() if len(model) <= 3 else model.capitalize()} {batch}".strip()


def _rows(result: dict, group: str, setting=None) -> list[dict]:
    section = next((s for s in result["sections"] if s["group"] == group), None)
    if section is None:
        return []
    return [row for row in section["rows"] if row["labels"]["ours"] in _DEFAULT_OURS
            and (setting is None or setting(row["setting"]))]


def _versus_jax(title: str, rows: list[dict], label) -> Panel | None:
    rows = [row for row in rows if row["ratios"]["ours/jax"] is not None]
    if not rows:
        return None
    values = [row["ratios"]["peer/jax"] for row in rows] + [row["ratios"]["ours/jax"]
                                                             for row in rows]
    known = [v for v in values if v]
    return Panel(title, [label(row) for row in rows],
                 [("ours (jax2tf-native)", [row["ratios"]["ours/jax"] for row in rows]),
                  ("jax2tf", [row["ratios"]["peer/jax"] for row in rows])],
                 log_scale=max(known) / min(known) > 10)


def panels(result: dict) -> list[Panel]:
    """The panels of a run's plot, from its results dict (`latest.json`)."""
    plain = lambda s: "jit_compile" not in s  # noqa: E731
    jit = lambda s: "jit_compile" in s  # noqa: E731
    found = [
        _versus_jax("Forward pass, tf.function", _rows(result, "forward", plain),
                    lambda r: _workload(r["workload"])),
        _versus_jax("Forward pass, jit_compile=True",
                    _rows(result, "forward", jit), lambda r: _workload(r["workload"])),
        _versus_jax("Training step (gradients)", _rows(result, "gradient"),
                    lambda r: f"{_workload(r['workload'])}{' jit' if jit(r['setting']) else ''}"),
        _versus_jax("Conversion: time to the first result", _rows(result, "conversion"),
                    lambda r: f"{_workload(r['workload'])} {r['setting']}"),
        _versus_jax("Served from a SavedModel", _rows(result, "savedmodel"),
                    lambda r: f"{_workload(r['workload'])} {r['setting'].split()[-1]}"),
        _versus_jax("Tiny call, sin(x) * 2", _rows(result, "dispatch"),
                    lambda r: r["setting"]),
    ]
    no_jax = [row for row in _rows(result, "savedmodel")
              if row["ratios"]["ours/jax"] is None and row["ratios"]["ours/peer"] is not None]
    if no_jax:
        found.append(Panel("SavedModel vs jax2tf's recipe",
                           [f"{_workload(r['workload'])} {r['setting']}" for r in no_jax],
                           [("ours (jax2tf-native)", [r["ratios"]["ours/peer"] for r in no_jax])],
                           xlabel="ours / jax2tf's recipe  (1 = the same)"))
    return [panel for panel in found if panel is not None]


NOTE = ("Default options only: the variants\n(with_gradient=False, gradient_argnums,\n"
        "recompute, save(jit_compile=False)) are\nin the tables of {tables}.\n\n"
        "The black line is jax.jit (1.0):\nbars left of it are faster than JAX.\n"
        "\"jit\": tf.function(jit_compile=True).")


def render(result: dict, path: str | Path) -> Path:
    """Draws `panels(result)` in two columns and writes the PNG (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    chosen = panels(result)
    rows = (len(chosen) + 1) // 2
    heights = [max(len(chosen[i].labels) for i in (2 * r, 2 * r + 1) if i < len(chosen))
               for r in range(rows)]
    fig, axes = plt.subplots(rows, 2, figsize=(11, 0.5 * sum(heights) + 1.2 * rows + 1.0),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, panel in zip(axes.flat, chosen):
        _draw(ax, panel)
        if panel.log_scale:
            ax.xaxis.set_major_locator(FixedLocator([1, 2, 5, 10, 20, 50, 100]))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    spare = list(axes.flat)[len(chosen):]
    for ax in spare:
        ax.axis("off")
    path = Path(path)
    if spare:
        spare[0].text(0.02, 0.95, NOTE.format(tables=path.with_suffix(".md").name), va="top", fontsize=12, transform=spare[0].transAxes,
                      color="#444444", linespacing=1.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (OURS_COLOR, PEER_COLOR)]
    fig.legend(handles, ["ours (jax2tf-native)", "jax2tf"], loc="upper right", ncol=2,
               fontsize=13, frameon=False, bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"Time relative to jax.jit ({result['mode']} run, "
                 f"{result['environment']['cpus']} CPUs; lower is better)", fontsize=15,
                 x=0.0, ha="left", y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 0.97), h_pad=2.2, w_pad=2.5)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _draw(ax, panel: Panel) -> None:
    count = len(panel.series)
    height = 0.8 / count
    ys = range(len(panel.labels))
    for k, (name, values) in enumerate(panel.series):
        color = OURS_COLOR if k == 0 else PEER_COLOR
        offsets = [y + (k - (count - 1) / 2) * height for y in ys]
        drawn = [v if v is not None else 0 for v in values]
        ax.barh(offsets, drawn, height=height * 0.92, color=color, label=name)
        for y, value in zip(offsets, values):
            if value is not None:
                ax.text(value, y, f" {value:.2f}", va="center", fontsize=11)
    ax.set_yticks(list(ys), panel.labels, fontsize=12.5)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=1.0)
    if panel.log_scale:
        ax.set_xscale("log")
    known = [v for _, values in panel.series for v in values if v is not None]
    ax.set_xlim(right=max(known) * (2.0 if panel.log_scale else 1.2))
    ax.set_title(panel.title, fontsize=13.5, loc="left", fontweight="bold")
    ax.set_xlabel(panel.xlabel, fontsize=11)
    ax.tick_params(axis="x", labelsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
