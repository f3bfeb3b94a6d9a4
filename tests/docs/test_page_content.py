"""What the pages say, checked against its sources: the API index's grouping, the numbers the
README and the guides share, the benchmark plot's panels, the TF.js page's limits.

Cheap text checks (no TensorFlow, no build); the pages' code runs in test_doc_examples.py and
the site builds in test_site.py.
"""
import json
import re
from pathlib import Path

from benchmarks import report_plot
from tools import api_groups, griffe_examples, mkdocs_hooks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _sections(markdown: str) -> dict[str, str]:
    """{`## heading`: its text} in order."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def test_api_index_groups_names_by_task_with_errors_last():
    sections = _sections((DOCS / "api" / "index.md").read_text(encoding="utf-8"))
    titles = list(sections)
    assert titles[0] == "Convert" and titles[-1] == "Errors", titles
    assert titles.index("Save for TF Serving") < titles.index("Inspect and verify") \
        < titles.index("Export to TFLite and TF.js") < titles.index("Command line")
    first_link = re.search(r"\[`([^`]+)`\]", sections["Convert"]).group(1)
    assert first_link == "jax2tf_native.convert"
    pages = {p.stem for p in (DOCS / "api").glob("*.*.md")}
    errors = set(re.findall(r"\[`([^`]+)`\]", sections["Errors"]))
    assert errors == {p for p in pages if p.endswith("Error")}, errors ^ {
        p for p in pages if p.endswith("Error")}
    listed = [name for text in sections.values() for name in re.findall(r"\[`([^`]+)`\]", text)]
    assert sorted(n for n in listed if n != "jax2tf-native") == sorted(pages)


def test_api_nav_follows_the_index_groups():
    nav = mkdocs_hooks.api_nav(DOCS)
    titles = [next(iter(entry)) for entry in nav]
    assert titles == (["Overview"] + [g.title for g in api_groups.API_GROUPS[:-1]]
                      + ["Command line", "Errors"])
    convert_group = nav[1]["Convert"]
    assert convert_group[0] == {"convert": "api/jax2tf_native.convert.md"}


def test_every_api_page_is_in_one_group():
    pages = [p.stem for p in (DOCS / "api").glob("*.*.md")]
    grouped = [page for _, members in api_groups.group_pages(pages) for page in members]
    assert sorted(grouped) == sorted(pages)
    try:
        api_groups.group_pages(pages + ["jax2tf_native.new_name"])
    except ValueError as e:
        assert "jax2tf_native.new_name" in str(e) and "api_groups.py" in str(e)
    else:
        raise AssertionError("a page in no group was accepted")


def test_eager_call_numbers_are_the_measured_ones_everywhere():
    """The README's table and the migration guide state the same eager-call times, both those
    of the README's table re-run (tools/results/readme_table_check.md)."""
    results = (ROOT / "tools" / "results" / "readme_table_check.md").read_text(encoding="utf-8")
    row = _sections(results)[next(t for t in _sections(results) if t.startswith("Row: eager"))]
    measured = {m.group(1): float(m.group(2))
                for m in re.finditer(r"^\| (ours eager|peer eager) \| ([\d.]+) \|", row, re.M)}
    ours, peer = f"{measured['ours eager']:.2f} ms", f"{measured['peer eager']:.1f} ms"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    eager_row = next(line for line in readme.splitlines() if line.startswith("| eager calls"))
    compat = (DOCS / "compat.md").read_text(encoding="utf-8")
    eager_item = next(p for p in compat.split("\n- ") if p.startswith("**Eager calls**"))
    for text in (eager_row, eager_item):
        assert ours in text and peer in text, (ours, peer, text)
        assert not re.search(r"\b0\.\d\d ms\b", text.replace(ours, "")), text


def test_grouped_parameter_entries_get_one_entry_each():
    docstring = ("Checks.\n\n    Args:\n      fun: the function.\n      rtol, atol: tolerances;\n"
                 "        default the dtype's.\n      seed: the seed.\n\n    Returns:\n"
                 "      a, b: not parameters.\n")
    assert griffe_examples.split_grouped_entries(docstring) == (
        "Checks.\n\n    Args:\n      fun: the function.\n      rtol: tolerances;\n"
        "        default the dtype's.\n      atol: tolerances;\n        default the dtype's.\n"
        "      seed: the seed.\n\n    Returns:\n      a, b: not parameters.\n")


def test_benchmark_plot_has_small_panels_of_the_default_options():
    """latest.png, from the committed results: a panel per workload, each with at most
    MAX_BARS bars and short labels, ours next to the peer for every default-options row."""
    result = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())
    panels = report_plot.panels(result)
    assert {"Forward pass, tf.function", "Training step (gradients)",
            "Served from a SavedModel"} <= {p.title for p in panels}
    for panel in panels:
        assert 0 < panel.bars <= report_plot.MAX_BARS, (panel.title, panel.bars)
        assert max(len(label) for label in panel.labels) <= 30, panel.labels
    default_rows = [row for section in result["sections"] for row in section["rows"]
                    if row["labels"]["ours"] in report_plot._DEFAULT_OURS]
    drawn = sum(len(p.labels) for p in panels)
    assert drawn == len(default_rows), (drawn, len(default_rows))
    # The values are the run's ratios: the CNN training step's, ours and the peer's.
    training = next(p for p in panels if p.title == "Training step (gradients)")
    row = next(r for r in default_rows if r["workload"] == "cnn b64"
               and r["setting"] == "tf.function" and r["labels"]["ours"] == "ours (default)")
    index = training.labels.index("CNN b64")
    assert training.series[0][1][index] == row["ratios"]["ours/jax"]
    assert training.series[1][1][index] == row["ratios"]["peer/jax"]


def test_tfjs_page_says_sorting_cannot_reach_tfjs():
    """The page's own code shows the refusal (it runs in test_doc_examples); the text must
    say which JAX calls and why."""
    page = (DOCS / "tfjs.md").read_text(encoding="utf-8")
    section = _sections(page.replace("### ", "## "))["What cannot reach TF.js: sorting"]
    for phrase in ("`jnp.sort`", "`jnp.argsort`", "`jax.lax.top_k`", "`Bitcast`",
                   "`BitwiseXor`"):
        assert phrase in section, phrase
