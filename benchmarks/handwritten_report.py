"""The report of benchmarks/plain_vs_handwritten.py: the targets checked per model,
the markdown tables and the plot, all from the run's results dict (so `--render` can redraw a
committed JSON).

Targets (ours / hand-written): op counts (TF graph, TFLite operators, TF.js graph nodes) <=
1.25x; latency (tf.function at batch 1 and 32, TFLite `invoke()` at batch 1, TF.js in Node at
batch 1 and 8) <= 1.15x. A latency ratio is the median of the per-round ratios
(`rows.paired`: both sides timed in the same rounds, so load changes cancel); a miss is marked
"within noise" when the limit lies inside that ratio's p10-p90.
"""
from __future__ import annotations

from pathlib import Path

from benchmarks import rows

OPS_LIMIT, LATENCY_LIMIT = 1.25, 1.15
# (key, heading, kind): kind "ops" reads result[group]["counts"], "time" reads a batch's stats.
METRICS = (
    ("tf_ops", "TF compute ops", "ops"),
    ("tf_b1", "tf.function b1", "time"),
    ("tf_b32", "tf.function b32", "time"),
    ("tflite_ops", "TFLite operators", "ops"),
    ("tflite_b1", "TFLite invoke b1", "time"),
    ("tfjs_nodes", "TF.js nodes", "ops"),
    ("tfjs_b1", "TF.js Node b1", "time"),
    ("tfjs_b8", "TF.js Node b8", "time"),
)
_LABELS = {"mlp": "MLP", "cnn": "CNN", "transformer": "Transformer", "resnet": "ResNet"}
_WHERE = {"tf_ops": ("ops", None), "tf_b1": ("tf", "1"), "tf_b32": ("tf", "32"),
          "tflite_ops": ("tflite", None), "tflite_b1": ("tflite", "1"),
          "tfjs_nodes": ("tfjs", None), "tfjs_b1": ("tfjs", "1"), "tfjs_b8": ("tfjs", "8")}


def check(model: dict, key: str) -> dict:
    """One target of one model: {"ours", "keras", "ratio", "limit", "status", "why"}; values
    are counts or seconds (None where a side is missing)."""
    group, batch = _WHERE[key]
    part = model.get(group)
    kind = {k: kind for k, _, kind in METRICS}[key]
    limit = OPS_LIMIT if kind == "ops" else LATENCY_LIMIT
    out = {"ours": None, "keras": None, "ratio": None, "limit": limit, "status": "not run",
           "why": ""}
    if part is None:
        return out
    if kind == "ops":
        counts = part["counts"] if group != "ops" else part
        ours, keras = (sum(counts[s].values()) if counts.get(s) is not None else None
                       for s in ("ours", "keras"))
        out.update(ours=ours, keras=keras)
        if ours is not None and keras:
            out["ratio"] = ours / keras
    else:
        if batch not in part.get("time", {}) and not part.get("errors") \
                and not part.get("skipped"):
            return out
        stats = part.get("time", {}).get(batch, {}).get("stats", {})
        ours, keras = stats.get("ours"), stats.get("keras")
        out.update(ours=ours and ours["median"], keras=keras and keras["median"])
        pair = rows.paired(ours, keras)
        if pair:
            out.update(ratio=pair["median"], p10=pair["p10"], p90=pair["p90"])
    if out["ratio"] is None:
        errors = part.get("errors", {})
        out["status"] = "n/a"
        out["why"] = "; ".join(f"{side}: {errors[side]}" for side in ("ours", "keras")
                               if errors.get(side)) or part.get("skipped", "")
        return out
    if out["ratio"] <= limit:
        out["status"] = "pass"
    elif kind == "time" and out["p10"] <= limit:
        out["status"] = "FAIL (within noise)"
    else:
        out["status"] = "FAIL"
    return out


def checks(result: dict) -> dict[str, dict[str, dict]]:
    """{model: {metric key: check}} for every model of the run."""
    return {m["model"]: {key: check(m, key) for key, _, _ in METRICS}
            for m in result["models"]}


def _value(v, kind) -> str:
    if v is None:
        return "–"
    return str(v) if kind == "ops" else f"{v * 1e3:.3f}"


def _cell(c: dict, kind: str) -> str:
    if c["status"] == "not run":
        return "not run"
    if c["ratio"] is None:
        return f"{_value(c['ours'], kind)} / {_value(c['keras'], kind)}: n/a"
    mark = "✓" if c["status"] == "pass" else ("✗ (noise)" if "noise" in c["status"] else "✗")
    return f"{_value(c['ours'], kind)} / {_value(c['keras'], kind)} = **{c['ratio']:.2f}** {mark}"


def _stats_ms(s: dict | None) -> str:
    return f"{s['median'] * 1e3:.3f} ({s['p10'] * 1e3:.3f}–{s['p90'] * 1e3:.3f})" if s else "–"


def _per_type(ours: dict | None, keras: dict | None) -> list[str]:
    types = sorted(set(ours or {}) | set(keras or {}))
    lines = ["| op | ours | hand-written | ours − hand-written |", "|---|---:|---:|---:|"]
    for t in types:
        a, b = (ours or {}).get(t, 0), (keras or {}).get(t, 0)
        lines.append(f"| {t} | {a if ours is not None else '–'} | "
                     f"{b if keras is not None else '–'} | "
                     f"{a - b if ours is not None and keras is not None else ''} |")
    return lines


def readme_row(result: dict) -> str:
    """The README table's `enable_xla=False` row, its jax2tf-native cell extended with this
    run: ours / hand-written Keras per model, op counts in TF, TFLite and TF.js."""
    found = checks(result)
    ratio = lambda c: f"{c['ratio']:.2f}" if c["ratio"] else "–"  # noqa: E731
    counts = ("tf_ops", "tflite_ops", "tfjs_nodes")
    per_model = "; ".join(f"{_LABELS.get(m, m)} {'/'.join(ratio(c[k]) for k in counts)}"
                          for m, c in found.items())
    met = sum(1 for c in found.values() for v in c.values() if v["status"] == "pass")
    known = sum(1 for c in found.values() for v in c.values()
                if v["status"] not in ("n/a", "not run"))
    return ("| `enable_xla=False` (graphs of ordinary TF ops, for TF.js, TFLite builtins, tf2onnx, "
            "Core ML, TF without XLA) | removed in JAX 0.4.36; the parameter is deprecated and "
            "ignored (always one `XlaCallModule`) | plain TF ops: the exported StableHLO lowered "
            "op by op, gradients the exported JAX VJPs lowered the same way; what cannot be "
            "lowered exactly is refused at conversion ([without XLA](docs/guides/without_xla.md))"
            "; against the same models hand-written in Keras, ops ours / Keras in TF/TFLite/TF.js:"
            f" {per_model}; {met} of {known} op-count and latency targets met ([benchmark]"
            "(benchmarks/results/plain_vs_handwritten.md)) |")


def markdown(result: dict) -> str:
    found = checks(result)
    env = result["environment"]
    lines = [
        "# Plain graphs vs the same models hand-written in Keras", "",
        f"`{result['command']}` ({result['minutes']:.1f} min). {result['machine']} "
        f"JAX {env['jax']}, TF {env['tensorflow']}, Keras {env.get('keras', '?')}, "
        f"TF.js {result.get('tfjs_version') or '–'} (Node, CPU backend), Python "
        f"{env['python']}, {env['cpus']} CPUs. {result['mode'].capitalize()} run: "
        f"{result['rounds']} rounds in TF and TFLite, {result['tfjs_rounds']} in Node.", "",
        "Ours: `convert(apply, polymorphic_shapes=[None, \"(b, ...)\"], enable_xla=False)` "
        "over `tf.Variable`s in a `tf.function`; TFLite through `saved_model_tools.save("
        "enable_xla=False, with_gradient=False)` + `tflite.convert_to_tflite`; TF.js through "
        "`saved_model_tools.tfjs.convert_to_tfjs`. Hand-written: the Keras model "
        "(benchmarks/handwritten_pairs.py, same weights) in a `tf.function` "
        "(`training=False`); TFLite from `model.export` through `TFLiteConverter` (defaults); "
        "TF.js from the same SavedModel through tensorflowjs 4.22's converter (defaults). "
        "Every candidate's output was checked against `jax.jit` before timing.", "",
        f"Targets (ours / hand-written): counts <= {OPS_LIMIT}x, latency <= {LATENCY_LIMIT}x. "
        "Counts: ops of the graph and its function library without Placeholder, Const, "
        "Identity(N), NoOp, variable reads/handles, _Arg/_Retval and calls (TF); operators of "
        "every subgraph (TFLite); model.json nodes without Placeholder and Const (TF.js). "
        "Cells: ours / hand-written = ratio (times in ms, median over the rounds; the ratio is "
        "the median of the per-round ratios).", "",
        "| model | " + " | ".join(h for _, h, _ in METRICS) + " |",
        "|---|" + "---|" * len(METRICS)]
    for model, c in found.items():
        lines.append(f"| {model} | " + " | ".join(_cell(c[k], kind) for k, _, kind in METRICS)
                     + " |")
    failed = [(m, h, c[k]) for m, c in found.items() for k, h, _ in METRICS
              if c[k]["status"].startswith("FAIL")]
    lines += ["", f"**{sum(1 for c in found.values() for v in c.values() if v['status'] == 'pass')}"
              f" targets met, {len(failed)} missed**"
              + (": " + ", ".join(f"{m} {h} ({c['ratio']:.2f})" for m, h, c in failed)
                 if failed else "") + "."]
    not_measured = [(m, h, c[k]["why"]) for m, c in found.items() for k, h, _ in METRICS
                    if c[k]["status"] == "n/a"]
    if not_measured:
        lines += ["", "Not measurable:", ""] + [f"- {m} {h}: {why}" for m, h, why in
                                                 not_measured]
    for model in result["models"]:
        lines += ["", f"## {model['model']}", ""]
        for side, diff in sorted(model.get("max_abs_diff", {}).items()):
            lines.append(f"- max |{side} − jax.jit|: {diff:.1e}")
        for group, title in (("tf", "tf.function"), ("tflite", "TFLite invoke()"),
                             ("tfjs", "TF.js in Node")):
            for batch, timing in sorted((model.get(group) or {}).get("time", {}).items(),
                                        key=lambda kv: int(kv[0])):
                s = timing["stats"]
                lines.append(f"- {title} b{batch}, ms per call, median (p10–p90), "
                             f"{timing['calls_per_round']} calls per round: " + ", ".join(
                                 f"{label} {_stats_ms(st)}" for label, st in s.items()))
        for group, title in (("ops", "TF graph ops"), ("tflite", "TFLite operators"),
                             ("tfjs", "TF.js graph nodes")):
            part = model.get(group)
            if part is None:
                continue
            counts = part if group == "ops" else part["counts"]
            lines += ["", f"{title}:", ""] + _per_type(counts.get("ours"), counts.get("keras"))
            extra = counts.get("ours via tensorflowjs")
            if group == "tfjs" and part.get("ours_via_tensorflowjs_error"):
                lines += ["", "Ours through tensorflowjs's converter (`strip_debug_ops`, "
                          f"`skip_op_check`): {part['ours_via_tensorflowjs_error']}"]
            if extra is not None:
                lines += ["", "Our SavedModel through tensorflowjs's converter (`strip_debug_ops`,"
                          f" `skip_op_check`) instead of our writer: "
                          f"{sum(extra.values())} nodes ("
                          + ", ".join(f"{k} {v}" for k, v in sorted(extra.items())) + "); "
                          "counted only, not run: without the op check it may write what "
                          "TF.js cannot run."]
    lines += ["", "## README row", "", "```text", readme_row(result), "```"]
    return "\n".join(lines) + "\n"


def _machine(result: dict) -> str:
    load = result["load_average"]
    text = (f"{result['environment']['cpus']} CPUs, 1-minute load {load['start']:.1f} at the "
            f"start,\n{load['end']:.1f} at the end")
    return text + ("\n(a busy machine: times are rough)" if max(load.values()) > 2.5 else "")


def render(result: dict, path: str | Path) -> Path:
    """The ratios as horizontal bars against the 1.25x / 1.15x lines (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = checks(result)
    models = list(found)
    panels = [("Op counts, ours / hand-written", OPS_LIMIT,
               [("TF graph", "tf_ops"), ("TFLite", "tflite_ops"), ("TF.js", "tfjs_nodes")]),
              ("tf.function latency, ours / hand-written", LATENCY_LIMIT,
               [("batch 1", "tf_b1"), ("batch 32", "tf_b32")]),
              ("TFLite and TF.js latency, ours / hand-written", LATENCY_LIMIT,
               [("TFLite b1", "tflite_b1"), ("TF.js b1", "tfjs_b1"), ("TF.js b8", "tfjs_b8")])]
    colors = ["#3f51b5", "#ff9800", "#009688"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 1.0 * len(models) * 2 + 3), squeeze=False)
    for ax, (title, limit, series) in zip(axes.flat, panels):
        height = 0.8 / len(series)
        top = limit
        for k, (name, key) in enumerate(series):
            ys = [y + (k - (len(series) - 1) / 2) * height for y in range(len(models))]
            values = [found[m][key]["ratio"] for m in models]
            ax.barh(ys, [v or 0 for v in values], height=height * 0.92, color=colors[k],
                    label=name)
            for y, v, m in zip(ys, values, models):
                label = (f" {v:.2f}" if v else
                         " not run" if found[m][key]["status"] == "not run" else " n/a")
                ax.text(v or 0, y, label, va="center", fontsize=10.5)
                top = max(top, v or 0)
        ax.set_yticks(range(len(models)), [_LABELS.get(m, m) for m in models], fontsize=12.5)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=1.0)
        ax.axvline(limit, color="#c62828", linewidth=1.5, linestyle="--")
        ax.set_xlim(0, top * 1.25)
        ax.set_title(title, fontsize=13, loc="left", fontweight="bold")
        ax.set_xlabel(f"ratio (lower is better; red line: target {limit}x)", fontsize=11)
        ax.legend(fontsize=10.5, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=len(series), frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    note = axes.flat[3]
    note.axis("off")
    note.text(0.02, 0.95, "Black line: as many ops / as fast as\nthe hand-written Keras model.\n"
              "Bars right of the red line miss the\ntarget.\n\n"
              "n/a: a side did not convert\n(see the tables of "
              f"{Path(path).with_suffix('.md').name}).\n\n{_machine(result)}",
              va="top", fontsize=12, transform=note.transAxes, color="#444444", linespacing=1.5)
    fig.suptitle("Plain graphs (enable_xla=False) vs the same models hand-written in Keras",
                 fontsize=14, x=0.0, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97), h_pad=2.0, w_pad=2.5)
    path = Path(path)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
