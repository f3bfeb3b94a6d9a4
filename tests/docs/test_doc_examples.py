"""Every code block of README.md and of the pages under docs/ runs (issue 31: the docs cannot
drift from the code). One test per page, so a failure names the page; the pages' processes all
start from one module fixture, two at a time (the suite's machine has 2 cores), so the module
takes about half the sum of the pages' times. docs/api/ is generated from docstrings, whose
examples run as doctests already.

Blocks that do not run (install commands, shown output) are printed with their reasons:
`python -m pytest tests/docs -rA` shows them. The same report for chosen pages:
`python -m tools.doc_examples docs/guides/convert.md`.
"""
from pathlib import Path

import pytest

from tools import doc_examples

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + sorted(
    str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "docs").rglob("*.md")
    if "api" not in path.relative_to(REPO_ROOT / "docs").parts[:1])


@pytest.fixture(scope="module")
def page_runs(request):
    """{page: Future of its PageResult} for the pages this session selected, all started."""
    selected = [item.callspec.params["page"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")]
    yield doc_examples.run_pages([REPO_ROOT / p for p in selected], jobs=2)
    doc_examples.stop_all()  # nothing left when every test waited; an interrupted run ends them


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page, page_runs):
    result = page_runs[str(REPO_ROOT / page)].result()
    report = doc_examples.describe(result)
    if not result.ok:
        pytest.fail(report, pytrace=False)
    print(report)
    not_run = result.python_not_run
    assert not not_run, f"{page}: Python blocks not run: {[b.line for b in not_run]}"
    assert result.run_blocks or not any(b.tag in doc_examples.PYTHON_TAGS
                                        for b in result.blocks)


def test_runner_runs_blocks_in_order_and_names_the_failing_line(tmp_path):
    """The runner itself, on a small page without TF: Python and shell blocks share the working
    directory in order, output and install blocks are not run, and a failure names its line."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nopen('a.txt', 'w').write('1')\nvalue = 2\n```\n"
        "```bash\npip install something\n```\n"
        "```bash\necho 3 >> a.txt\n```\n"
        "```text\nshown output\n```\n"
        "```python\nassert open('a.txt').read() == '13\\n' and value == 2\n"
        "raise ValueError('page broke here')\n```\n")
    result = doc_examples.run_page(page)
    assert not result.ok
    assert [b.kind for b in result.blocks] == ["python", "none", "shell", "none", "python"]
    assert result.blocks[1].reason == doc_examples.INSTALLS_REASON
    assert result.failed_block is result.blocks[4] and result.failed_block.line == 14
    assert result.started == 3
    assert f'File "{page}", line 16' in result.error_tail
    assert "ValueError: page broke here" in result.error_tail


def test_runner_fails_a_page_that_exits_before_its_last_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport sys\nsys.exit(0)\n```\n```python\nprint(1)\n```\n")
    result = doc_examples.run_page(page)
    assert not result.ok and result.started == 1
    assert "before the block at line 5 ran" in result.error_tail


def test_getting_started_installs_with_the_readme_command():
    """docs/getting_started.md shows the README's command 1 (which .ci/run runs) as its install
    step; the two copies must stay the same command."""
    def first_bash_block(page: str) -> str:
        blocks = [b for b in doc_examples.extract_blocks(REPO_ROOT / page) if b.tag == "bash"]
        return blocks[0].text.strip()
    assert first_bash_block("docs/getting_started.md") == first_bash_block("README.md")
