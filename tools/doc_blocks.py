"""The fenced code blocks of a Markdown page, and how tools/doc_examples.py runs each one.

A block runs the way a reader of the page would run it:

- ```python / ```py: in one namespace per page, top to bottom, as pasted into one interpreter;
- ```bash / ```sh: `bash -e -o pipefail -c BLOCK` in the page's working directory, as typed in
  a terminal there;
- a block with a file name, ```js title="check.mjs" (mkdocs-material shows the name above the
  block): the reader saves it under that name. The runner writes it at its place in the order,
  and a later block must run it (`node check.mjs`), as the page tells the reader to;
- a block that installs software (pip, python -m venv, npm, apt) is not run: the README's
  command 1, which .ci/run runs, installs the Python stack. One exception, so that a page's
  JavaScript runs as the reader runs it: `npm install @tensorflow/tfjs@VERSION`, the TF.js
  pages' install step. In the reader's directory it creates `node_modules/@tensorflow/tfjs`;
  the runner instead links `node_modules` to tests/tfjs/node_modules, which `npm ci --prefix
  tests/tfjs` (.ci/run) installed from tests/tfjs/package-lock.json, after checking that the
  lock pins the VERSION the page installs. The `node FILE` command that follows is then the
  reader's command, resolving `@tensorflow/tfjs` from `./node_modules` as it would;
- likewise `pip install --no-deps tensorflowjs==4.22.0 tensorflow-hub==0.16.1 tf-keras==2.21.0`,
  the TF.js page's step for tensorflowjs's own converter: the runner adds the folder where
  those exact pins are installed `--no-deps --target` ($JAX2TF_NATIVE_TFJS_PY, default
  ~/.cache/jax2tf_native/tensorflowjs-4.22.0, the folder tests/tfjs/test_convert_jax.py uses;
  `install_tfjs_python` fills it) to the page's `sys.path`, as the reader's install adds them
  to the environment. Where that folder cannot be filled (no package index), the step and the
  Python blocks that import tensorflowjs are reported as not run, with the reason;
- a block that runs the test suite (pytest) is not run (the suite runs this file's pages);
- ```text, ```console, untagged and other blocks are shown output: not run.

A JavaScript block without a file name cannot be run as a reader would (which file? which
`node` command?): it is reported as not run, and tests/docs fails the page for it, as for a
Python block not run.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = REPO_ROOT / "tests" / "tfjs" / "node_modules"
NODE_LOCK = REPO_ROOT / "tests" / "tfjs" / "package-lock.json"

PYTHON_TAGS = {"python", "py", "python3"}
SHELL_TAGS = {"bash", "sh", "shell"}
JS_TAGS = {"js", "javascript", "mjs"}
OUTPUT_TAGS = {"", "text", "console", "output", "none", "plain", "txt"}
# Blocks a reader runs; a page with one of these not run fails tests/docs.
MUST_RUN_TAGS = PYTHON_TAGS | JS_TAGS

INSTALLS_REASON = ("installs software (not run here; the README's command 1, which .ci/run "
                   "runs, installs what the suite needs)")
RUNS_TESTS_REASON = "runs the test suite: the README's command 2, run by .ci/run"
NO_NODE_REASON = ("needs Node and tests/tfjs/node_modules, missing here "
                  "(npm ci --prefix tests/tfjs)")
JS_WITHOUT_FILE_REASON = ('JavaScript without a file name: give the block title="FILE.mjs" and '
                          "run it with `node FILE.mjs` in a later block")
NO_TFJS_PY_REASON = ("needs tensorflowjs's Python converter in $JAX2TF_NATIVE_TFJS_PY "
                     "(tools.doc_blocks.install_tfjs_python), missing here")
TFJS_PY_PINS = ("tensorflowjs==4.22.0", "tensorflow-hub==0.16.1", "tf-keras==2.21.0")
# Why a block a reader runs may be left out here: an optional runtime this machine lacks.
ALLOWED_NOT_RUN = (NO_NODE_REASON, NO_TFJS_PY_REASON)
# A shell command that installs software, at the start of a command (after &&, ;, |, sudo).
_INSTALL_COMMAND = re.compile(
    r"(?:^|&&|\|\||;|\||\bsudo\s+)\s*"
    r"(?:pip3?(?:\.\d+)?\s|python[\d.]*\s+-m\s+(?:pip|venv)\b|npm\s|npx\s|yarn\s|"
    r"apt(?:-get)?\s|conda\s|uv\s+(?:pip|venv)\b)",
    re.MULTILINE)
# The TF.js pages' install step, alone in its block (comment lines aside).
_NPM_INSTALL_TFJS = re.compile(r"\A(?:\s*#.*\n)*\s*npm install @tensorflow/tfjs@(\S+)\s*\Z")
_PIP_TFJS = re.compile(r"\A(?:\s*#.*\n)*\s*pip install --no-deps ((?:\S+==\S+ *)+)\s*\Z")
_IMPORTS_TFJS = re.compile(r"^\s*(?:from|import)\s+tensorflowjs\b", re.MULTILINE)
_RUNS_NODE = re.compile(r"(?:^|&&|;|\|)\s*node\s", re.MULTILINE)
# The suite runs this file's pages: a page running the suite would run itself again.
_TEST_COMMAND = re.compile(r"\bpytest\b")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_TITLE = re.compile(r"""\btitle=(?:"([^"]+)"|'([^']+)'|(\S+))""")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a page.

    Attributes:
      line: the 1-based line of the opening fence in the .md file.
      tag: the fence's language tag, lowercased ("" when untagged).
      text: the block's content, the fence's indentation removed.
      kind: how it runs: "python", "shell", "file" (written to `file_name`), "npm_link" and
        "pip_path" (the TF.js pages' install steps, see the module docstring), or "none".
      reason: why a block is not run ("" for blocks that run).
      file_name: the fence's `title="..."`: the file a reader saves the block as ("" if none).
    """
    line: int
    tag: str
    text: str
    kind: str
    reason: str = ""
    file_name: str = ""

    @property
    def runs(self) -> bool:
        return self.kind != "none"


def node_available() -> bool:
    return NODE_MODULES.is_dir() and shutil.which("node") is not None


def locked_tfjs_version() -> str:
    """The @tensorflow/tfjs version tests/tfjs/package-lock.json pins."""
    lock = json.loads(NODE_LOCK.read_text(encoding="utf-8"))
    return lock["packages"]["node_modules/@tensorflow/tfjs"]["version"]


def link_node_modules(version: str, workdir: str | os.PathLike = ".") -> None:
    """What `npm install @tensorflow/tfjs@VERSION` leaves for `node`: `./node_modules` holding
    that version, here as a link to tests/tfjs/node_modules (see the module docstring)."""
    locked = locked_tfjs_version()
    if version != locked:
        raise RuntimeError(
            f"the page installs @tensorflow/tfjs@{version}, the suite's tests/tfjs/"
            f"package-lock.json pins {locked}: make them the same version")
    os.symlink(NODE_MODULES, Path(workdir) / "node_modules", target_is_directory=True)


def tfjs_python_dir() -> Path:
    """Where tensorflowjs's Python converter is installed `--no-deps --target` for the suite."""
    return Path(os.environ.get("JAX2TF_NATIVE_TFJS_PY",
                               Path.home() / ".cache/jax2tf_native/tensorflowjs-4.22.0"))


def tfjs_python_available() -> bool:
    return (tfjs_python_dir() / "tensorflowjs" / "converters" / "jax_conversion.py").is_file()


def install_tfjs_python() -> str:
    """Installs `TFJS_PY_PINS` --no-deps into `tfjs_python_dir()` unless there; returns "" or,
    when pip cannot (no package index), why."""
    if tfjs_python_available():
        return ""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                             "--target", str(tfjs_python_dir()), *TFJS_PY_PINS],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return f"pip could not install {' '.join(TFJS_PY_PINS)}: {result.stderr[-300:]}"
    return ""


def add_tfjs_python(pins: str) -> None:
    """What the reader's `pip install --no-deps PINS` gives the page: those packages importable
    (here from `tfjs_python_dir()`, after checking it holds exactly these versions)."""
    wanted = set(pins.split())
    if wanted != set(TFJS_PY_PINS):
        raise RuntimeError(f"the page installs {sorted(wanted)}, the suite's folder holds "
                           f"{sorted(TFJS_PY_PINS)} (tools/doc_blocks.py): make them the same")
    sys.path.append(str(tfjs_python_dir()))


def extract_blocks(page: str | os.PathLike) -> list[Block]:
    """The fenced blocks of a Markdown page, in order, each with whether and how it runs.

    Example:
      >>> [(b.tag, b.kind) for b in extract_blocks("README.md")][:2]
      [('bash', 'none'), ('bash', 'none')]
    """
    path = Path(page)
    lines = path.read_text(encoding="utf-8").splitlines()
    is_readme = path.resolve() == (REPO_ROOT / "README.md").resolve()
    raw: list[tuple[int, str, str, str]] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = len(opening["indent"]), opening["fence"], opening["info"].strip()
        tag = info.split(" ")[0].strip("{}.").lower()
        title = _TITLE.search(info)
        file_name = next((g for g in title.groups() if g), "") if title else ""
        start, body = i + 1, []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        raw.append((start, tag, "\n".join(body) + "\n", file_name))
        i += 1
    blocks, shell_seen = [], 0
    for line, tag, text, file_name in raw:
        kind, reason = _kind_and_reason(tag, text, file_name)
        if tag in SHELL_TAGS:
            shell_seen += 1
            if is_readme and shell_seen <= 2:
                kind, reason = "none", f"README command {shell_seen}, run by .ci/run"
        blocks.append(Block(line, tag, text, kind, reason, file_name))
    return blocks


def _kind_and_reason(tag: str, text: str, file_name: str) -> tuple[str, str]:
    if file_name and tag not in OUTPUT_TAGS:
        return "file", ""
    if tag in PYTHON_TAGS:
        if _IMPORTS_TFJS.search(text) and not tfjs_python_available():
            return "none", NO_TFJS_PY_REASON
        return "python", ""
    if tag in SHELL_TAGS:
        pins = _PIP_TFJS.match(text)
        if pins and any(pin.startswith("tensorflowjs==") for pin in pins.group(1).split()):
            return ("pip_path", "") if tfjs_python_available() else ("none", NO_TFJS_PY_REASON)
        npm = _NPM_INSTALL_TFJS.match(text)
        if npm or _RUNS_NODE.search(text):
            if not node_available():
                return "none", NO_NODE_REASON
            if npm:
                return "npm_link", ""
        if _INSTALL_COMMAND.search(text):
            return "none", INSTALLS_REASON
        if _TEST_COMMAND.search(text):
            return "none", RUNS_TESTS_REASON
        return "shell", ""
    if tag in JS_TAGS:
        return "none", JS_WITHOUT_FILE_REASON
    if tag in OUTPUT_TAGS:
        return "none", "shown output" if tag != "console" else "shown session (console)"
    return "none", "shown, not run (only python, bash/sh and blocks with a file name run)"


def step_argument(block: Block) -> str:
    """What a block's step needs besides its text: the file name, the npm version, the pins."""
    if block.kind == "file":
        return block.file_name
    if block.kind == "npm_link":
        return _NPM_INSTALL_TFJS.match(block.text).group(1)
    if block.kind == "pip_path":
        return " ".join(_PIP_TFJS.match(block.text).group(1).split())
    return ""


def files_never_run(blocks: list[Block]) -> list[Block]:
    """File blocks whose name no later block that runs mentions (written, then never used)."""
    unused = []
    for index, block in enumerate(blocks):
        if block.kind == "file" and not any(
                (later.runs or later.reason in ALLOWED_NOT_RUN) and later.kind != "file"
                and block.file_name in later.text for later in blocks[index + 1:]):
            unused.append(block)
    return unused
