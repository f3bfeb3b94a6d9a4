"""mkdocs hooks (mkdocs.yml `hooks:`): links from the docs to files outside docs/ work in the site.

The pages under docs/ link to the repository's other files with relative paths that also work
on GitHub: results tables (`../benchmarks/results/latest.md`), plots (`latest.png`), source
and test files (`../jax2tf_native/converter.py`). mkdocs only knows the files under docs/, so
such a link would be "not found" and, under `strict`, fail the build. These hooks:

1. `on_files`: read every page's Markdown for relative links, and add each linked repository
   file outside docs/ to the site under `repo/<its path>` (Markdown files as pages, rendered
   with the theme and scanned in turn for their own links; other files copied as they are).
   A link to a directory stands for its README.md when it has one.
2. A Markdown tree processor that runs before mkdocs's own link resolution: a link's target
   is resolved against the real location of the page's source (docs/x.md, or
   benchmarks/results/y.md for an added page, or the file a page includes whole with
   `--8<-- "CHANGELOG.md"`), then rewritten to the target's place in the site: under docs/ the
   page itself, elsewhere `repo/<path>`. Links between repository pages therefore keep
   working, in both directions.

3. `on_page_markdown`: a line `<!-- installed-docstring: jax/experimental/jax2tf/call_tf.py
   call_tf -->` (tools/api_pages.py writes them for the jax2tf objects that jax2tf_native
   re-exports) becomes that object's signature and docstring, read statically from the
   installed package's source. mkdocstrings would have to load all of `jax` statically for
   them (20 s and more), this reads one file each; the page always shows the installed
   version. An object that moved fails the build, naming the line.

4. `on_config`: the nav's `API: api/` becomes the API pages grouped by task
   (`tools/api_groups.py`, the table the API index is written from), and
   `extra.package_version` is `jax2tf_native.__version__`, which the header shows
   (overrides/partials/header.html).

A link whose target does not exist is left as written, so mkdocs reports it and strict mode
fails the build: only links to real files are made to work. Only Markdown links and images
are rewritten: a raw HTML `src=`/`href=` that leaves docs/ is reported as a warning (so strict
fails) asking for the Markdown form.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import logging
import os
import posixpath
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import markdown
from markdown.treeprocessors import Treeprocessor
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, InclusionLevel

REPO_PREFIX = "repo"  # site folder of the files added from outside docs/
# Directories never published, whatever links to them.
_SKIPPED_DIRS = {".git", ".venv", ".pytest_cache", "site", "build", "dist", "node_modules",
                 "__pycache__"}

# Inline links and images `[text](target "title")`, and reference definitions `[id]: target`.
_LINK_RE = re.compile(
    r"\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*)?\)"
    r"|^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)",
    re.MULTILINE)
_RAW_HTML_LINK_RE = re.compile(r"<[a-zA-Z][^>]*\b(?:src|href)=[\"'](\.\./[^\"']*)[\"']")
log = logging.getLogger("mkdocs.hooks.jax2tf_native")
_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,}).*?^\1\2`*\s*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE_RE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_WHOLE_INCLUDE_RE = re.compile(r'\A\s*(?:<!--.*?-->\s*)*--8<--\s+"([^"]+)"\s*\Z', re.DOTALL)

_state: dict = {}


def _repo_root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def _without_code(text: str) -> str:
    return _INLINE_CODE_RE.sub("", _FENCE_RE.sub("", text))


def _link_targets(text: str):
    """Relative link targets in Markdown text, outside code blocks and code spans."""
    text = _without_code(text)
    for match in _LINK_RE.finditer(text):
        url = next(group for group in match.groups() if group)
        scheme, netloc, path, _, _ = urlsplit(url)
        if scheme or netloc or not path or path.startswith(("/", "\\")):
            continue
        yield unquote(path)


def _link_base(abs_src_path: Path, root: Path) -> Path:
    """The file a page's relative links are written from: itself, or the file it includes whole."""
    try:
        text = abs_src_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return abs_src_path
    match = _WHOLE_INCLUDE_RE.match(text)
    if match:
        included = (root / match.group(1)).resolve()
        if included.is_file():
            return included
    return abs_src_path


def _published(path: Path, root: Path) -> bool:
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False  # outside the repository
    return not any(part in _SKIPPED_DIRS for part in parts)


def _resolve(base: Path, link_path: str, root: Path) -> Path | None:
    """The existing repository file a relative link from `base` points to, or None."""
    target = Path(os.path.normpath(base.parent / link_path))
    if target.is_dir():
        target = target / "README.md"
    if not target.is_file() or not _published(target, root):
        return None
    return target


def _site_uri(target: Path, docs_dir: Path, root: Path) -> str:
    try:
        return target.relative_to(docs_dir).as_posix()
    except ValueError:
        return f"{REPO_PREFIX}/{target.relative_to(root).as_posix()}"


def api_nav(docs_dir: Path) -> list:
    """The nav of docs/api/ (tools/api_pages.py writes it): the overview, then a section per
    task as tools/api_groups.py groups the pages, the command line, and the errors last.

    mkdocs.yml names the folder (`API: api/`); each page is `api/<dotted name>.md`, listed by
    its short name (`verify.verify` as `verify`).
    """
    api_dir = docs_dir / "api"
    nav: list = [{"Overview": "api/index.md"}] if (api_dir / "index.md").is_file() else []
    pages = [page.stem for page in api_dir.glob("*.*.md")]
    for group, members in _api_groups.group_pages(pages):
        if group is _api_groups.API_GROUPS[-1] and (api_dir / "cli.md").is_file():
            nav.append({"Command line": "api/cli.md"})
        nav.append({group.title: [{_api_groups.short_name(p): f"api/{p}.md"} for p in members]})
    return nav


def _load_tool(name: str):
    """A sibling module of this file (mkdocs loads hooks by path: tools/ is not importable)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return sys.modules[name]


_api_groups = _load_tool("api_groups")


def package_version(root: Path) -> str:
    """`jax2tf_native.__version__`, read from the source (the site shows it in its header)."""
    tree = ast.parse((root / "jax2tf_native" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"):
            return ast.literal_eval(node.value)
    raise PluginError("jax2tf_native/__init__.py sets no __version__")


def _expand_api_nav(items, docs_dir: Path):
    for item in items:
        if isinstance(item, dict):
            for title, value in item.items():
                if value == "api/":
                    item[title] = api_nav(docs_dir)
                elif isinstance(value, list):
                    _expand_api_nav(value, docs_dir)


def on_config(config):
    root = _repo_root(config)
    docs_dir = Path(config.docs_dir).resolve()
    _state.clear()
    _state.update(root=root, docs_dir=docs_dir, page_base=None)
    config.markdown_extensions.append(_RepoLinksExtension())
    # overrides/partials/header.html shows it beside the site's name.
    config.extra["package_version"] = package_version(root)
    if config.nav:
        _expand_api_nav(config.nav, docs_dir)
    return config


def on_files(files, config):
    root, docs_dir = _state["root"], _state["docs_dir"]
    queue = [Path(f.abs_src_path).resolve() for f in files.documentation_pages()
             if f.abs_src_path]
    seen = set(queue)
    while queue:
        page = queue.pop()
        base = _link_base(page, root)
        for link_path in _link_targets(base.read_text(encoding="utf-8")):
            target = _resolve(base, link_path, root)
            if target is None or target in seen or target.is_relative_to(docs_dir):
                continue
            seen.add(target)
            files.append(File.generated(
                config, _site_uri(target, docs_dir, root), abs_src_path=str(target),
                inclusion=InclusionLevel.NOT_IN_NAV))
            if target.suffix == ".md":
                queue.append(target)
    return files


def on_page_markdown(markdown_text, page, config, files):
    _state["page_base"] = _link_base(Path(page.file.abs_src_path).resolve(), _state["root"])
    _state["page_uri"] = page.file.src_uri
    for match in _RAW_HTML_LINK_RE.finditer(_without_code(markdown_text)):
        target = Path(os.path.normpath(_state["page_base"].parent / match.group(1)))
        if not target.is_relative_to(_state["docs_dir"]):
            log.warning(f"Doc file '{page.file.src_uri}' links to '{match.group(1)}' in raw "
                        "HTML, which the site does not rewrite: use a Markdown link or image")
    try:
        return _INSTALLED_DOCSTRING_RE.sub(
            lambda m: render_installed(m.group(1), m.group(2)), markdown_text)
    except LookupError as e:
        raise PluginError(f"{page.file.src_uri}: {e}") from e


_INSTALLED_DOCSTRING_RE = re.compile(
    r"^<!-- installed-docstring: (\S+) (\S+) -->$", re.MULTILINE)


def installed_definition(source: str, name: str) -> ast.FunctionDef | ast.ClassDef:
    """The `def`/`class` named `name` at the top level of an installed package's file.

    `source` is the path from site-packages (`jax/experimental/jax2tf/call_tf.py`); the file is
    parsed, not imported. LookupError when the file or the definition is not there.
    """
    package = source.split("/")[0]
    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"package {package!r} is not installed")
    path = Path(list(spec.submodule_search_locations)[0]).parent / source
    if not path.is_file():
        raise LookupError(f"{path} does not exist (the installed {package} moved it)")
    text = path.read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return node
    raise LookupError(f"{source} defines no {name!r} (the installed {package} moved it)")


def installed_docstring(source: str, name: str) -> str:
    """An installed object's docstring (tools/api_pages.py takes the index's summary from it)."""
    return ast.get_docstring(installed_definition(source, name)) or "(no docstring)"


def render_installed(source: str, name: str) -> str:
    """Markdown for an installed object: its signature, and its docstring as written.

    jax's docstrings mix Google sections with reStructuredText, which a Google parser mangles;
    a text block shows them as their authors laid them out.
    """
    node = installed_definition(source, name)
    bare = copy.copy(node)
    bare.body, bare.decorator_list = [ast.Pass()], []
    header = ast.unparse(bare).rsplit("\n", 1)[0]  # `def f(...) -> T:` without its body
    if len(header) > 88:  # one parameter a line, as a formatter would
        opening, closing = header.index("("), _closing_parenthesis(header, header.index("("))
        parameters = _split_top_level(header[opening + 1:closing])
        header = (header[:opening + 1] + "\n" + "".join(f"    {p},\n" for p in parameters)
                  + header[closing:])
    docstring = installed_docstring(source, name)
    return f"```python\n{header}\n```\n\n```text\n{docstring}\n```"


def _closing_parenthesis(text: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(text)):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced parentheses in {text!r}")


def _split_top_level(text: str) -> list[str]:
    """`a: int, b=(1, 2)` -> ['a: int', 'b=(1, 2)']: commas outside brackets and strings."""
    parts, depth, start, quote = [], 0, 0, None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


class _RepoLinks(Treeprocessor):
    """Rewrites links to their target's place in the site (see the module docstring)."""

    def run(self, root_element):
        base = _state.get("page_base")
        if base is None:
            return None
        for element in root_element.iter():
            attribute = {"a": "href", "img": "src"}.get(element.tag)
            if attribute and element.get(attribute):
                element.set(attribute, self._rewrite(element.get(attribute), base))
        return None

    @staticmethod
    def _rewrite(url: str, base: Path) -> str:
        scheme, netloc, path, query, fragment = urlsplit(url)
        if scheme or netloc or not path or path.startswith(("/", "\\")):
            return url
        root, docs_dir = _state["root"], _state["docs_dir"]
        target = _resolve(base, unquote(path), root)
        if target is None:
            return url  # left for mkdocs to report
        site_uri = _site_uri(target, docs_dir, root)
        page_dir = posixpath.dirname(_state["page_uri"])
        return urlunsplit(("", "", posixpath.relpath(site_uri, page_dir or "."), query, fragment))


class _RepoLinksExtension(markdown.Extension):
    def extendMarkdown(self, md):
        # mkdocs's own link resolution ("relpath") runs at priority 0, after this one.
        md.treeprocessors.register(_RepoLinks(md), "jax2tf_native_repo_links", 2)
