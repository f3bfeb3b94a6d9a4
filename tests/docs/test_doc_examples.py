"""Every code block of README.md and of the pages under docs/ runs (issue 31: the docs cannot
drift from the code). One test per page, so a failure names the page; the pages' processes all
start from one module fixture, two at a time (the suite's machine has 2 cores), so the module
takes about half the sum of the pages' times. docs/api/ is generated from docstrings, whose
examples run as doctests already.

Each block runs as a reader runs it (tools/doc_blocks.py): Python in one interpreter, shell
blocks with bash, a JavaScript file saved under its name and run by the page's own
`node FILE` after the page's install step. Pages followed one after another must not write the
same files. Blocks that do not run (install commands, shown output) are printed with their
reasons:
`python -m pytest tests/docs -rA` shows them. The same report for chosen pages:
`python -m tools.doc_examples docs/guides/convert.md`.
"""
import re
from pathlib import Path

import pytest

from tools import doc_blocks, doc_examples

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + sorted(
    str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "docs").rglob("*.md")
    if "api" not in path.relative_to(REPO_ROOT / "docs").parts[:1])


@pytest.fixture(scope="module")
def page_runs(request):
    """{page: Future of its PageResult} for the pages this session selected, all started."""
    selected = [item.callspec.params["page"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")]
    # The TF.js page's `pip install --no-deps tensorflowjs==...` step uses this folder
    # (tools/doc_blocks.py); without a package index its blocks are reported as not run.
    missing = doc_blocks.install_tfjs_python() if "docs/tfjs.md" in selected else ""
    if missing:
        print(f"docs/tfjs.md: tensorflowjs's converter blocks not run: {missing}")
    yield doc_examples.run_pages([REPO_ROOT / p for p in selected], jobs=2)
    doc_examples.stop_all()  # nothing left when every test waited; an interrupted run ends them


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page, page_runs):
    result = page_runs[str(REPO_ROOT / page)].result()
    report = doc_examples.describe(result)
    if not result.ok:
        pytest.fail(report, pytrace=False)
    print(report)
    not_run = result.must_run_not_run
    assert not not_run, (f"{page}: Python / JavaScript blocks not run: "
                         f"{[(b.line, b.reason) for b in not_run]}")
    unused = doc_examples.files_never_run(result.blocks)
    assert not unused, (f"{page}: blocks saved as files that no later block runs: "
                        f"{[(b.line, b.file_name) for b in unused]}")
    assert result.run_blocks or not any(b.tag in doc_examples.PYTHON_TAGS
                                        for b in result.blocks)


def test_pages_followed_one_after_another_write_different_files(page_runs):
    """A reader who follows one page, then another in the same folder, must not find the
    second page failing on the first one's files (`save` refuses an existing model:
    FileExistsError) or overwriting them: the pages write distinct paths."""
    results = [future.result() for future in page_runs.values()]
    if len(results) < 2:
        pytest.skip("fewer than two pages selected: no pair to compare")
    assert sum(len(r.written) for r in results) > 0, "no page wrote a file: nothing compared"
    clashes = doc_examples.collisions(results)
    assert not clashes, "\n".join(
        f"{first} and {second} both write {files[:5]}{' ...' if len(files) > 5 else ''}"
        for (first, second), files in clashes.items())


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


def _commands(shell: str) -> list[str]:
    """A shell block's commands in order: one per line, `\\` continuations joined, `&&` split,
    comments dropped (the README writes its install as one `&&` line, the site as lines)."""
    joined = re.sub(r"\\\n\s*", " ", shell)
    commands = []
    for line in joined.splitlines():
        line = line.split(" #")[0].strip()
        if line and not line.startswith("#"):
            commands += [" ".join(part.split()) for part in line.split("&&")]
    return commands


@pytest.mark.parametrize("page", ["docs/getting_started.md", "docs/index.md"])
def test_install_steps_are_the_readme_command(page):
    """The site's install snippet (the home page, Getting started) is the README's command 1,
    which .ci/run runs, written as one command a line so that it fits under its copy button:
    the same commands in the same order, no line wider than the page's code column."""
    def first_bash_block(path: str) -> str:
        blocks = [b for b in doc_examples.extract_blocks(REPO_ROOT / path) if b.tag == "bash"]
        return blocks[0].text
    readme = _commands(first_bash_block("README.md"))
    assert len(readme) >= 4 and readme[-1].startswith("jax2tf-native demo"), readme
    snippet = first_bash_block(page)
    assert _commands(snippet) == readme
    assert max(len(line) for line in snippet.splitlines()) <= 80, snippet


def test_runner_runs_a_javascript_file_as_a_reader_does(tmp_path):
    """A ```js title="FILE" block is saved as FILE and run by the page's own `node FILE`
    after its `npm install @tensorflow/tfjs@VERSION` step; ES module syntax (import,
    top-level await) works as in Node 20. A JavaScript block without a file name is reported
    as not run, and a file no later block runs is found."""
    if not doc_blocks.node_available():
        pytest.skip(doc_blocks.NO_NODE_REASON)
    version = doc_blocks.locked_tfjs_version()
    page = tmp_path / "page.md"
    page.write_text(
        f"```bash\nnpm install @tensorflow/tfjs@{version}\n```\n"
        "```js title=\"check.mjs\"\nimport * as tf from '@tensorflow/tfjs';\n"
        "const sum = await tf.tensor([1, 2, 3]).sum().data();\n"
        "if (sum[0] !== 6) throw new Error(`sum ${sum[0]}`);\n"
        "console.log(`tfjs ${tf.version.tfjs}`);\n```\n"
        "```bash\nnode check.mjs > out.txt\n```\n"
        f"```python\nassert open('out.txt').read().strip() == 'tfjs {version}'\n```\n"
        "```js\nconsole.log('not run: which file?');\n```\n"
        "```js title=\"unused.mjs\"\nconsole.log(1);\n```\n")
    result = doc_examples.run_page(page)
    assert result.ok, doc_examples.describe(result)
    assert [b.kind for b in result.blocks] == ["npm_link", "file", "shell", "python", "none",
                                               "file"]
    assert result.must_run_not_run == [result.blocks[4]]
    assert result.blocks[4].reason == doc_blocks.JS_WITHOUT_FILE_REASON
    assert doc_examples.files_never_run(result.blocks) == [result.blocks[5]]
    assert result.written == ["check.mjs", "out.txt", "unused.mjs"]   # node_modules left out


def test_runner_refuses_a_tfjs_version_the_suite_does_not_have(tmp_path):
    if not doc_blocks.node_available():
        pytest.skip(doc_blocks.NO_NODE_REASON)
    page = tmp_path / "page.md"
    page.write_text("```bash\nnpm install @tensorflow/tfjs@0.0.1\n```\n")
    result = doc_examples.run_page(page)
    assert not result.ok and result.failed_block is result.blocks[0]
    assert "installs @tensorflow/tfjs@0.0.1" in result.error_tail
    assert doc_blocks.locked_tfjs_version() in result.error_tail


def test_runner_refuses_tensorflowjs_pins_the_suite_does_not_have():
    try:
        doc_blocks.add_tfjs_python("tensorflowjs==4.0.0 tensorflow-hub==0.16.1 tf-keras==2.21.0")
    except RuntimeError as e:
        assert "tensorflowjs==4.0.0" in str(e) and "tensorflowjs==4.22.0" in str(e)
    else:
        raise AssertionError("other tensorflowjs pins were accepted")


def test_collisions_name_the_pages_and_the_shared_files():
    pages = [doc_examples.PageResult("a.md", [], written=["models/cnn/1/saved_model.pb", "a"]),
             doc_examples.PageResult("b.md", [], written=["b"]),
             doc_examples.PageResult("c.md", [], written=["models/cnn/1/saved_model.pb"])]
    assert doc_examples.collisions(pages) == {("a.md", "c.md"): ["models/cnn/1/saved_model.pb"]}
