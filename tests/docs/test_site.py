"""The documentation site builds in strict mode, every public name has its API page, and the nav
lists every page under docs/ (and nothing else).

mkdocs, mkdocs-material and mkdocstrings come with the `docs` extra (`pip install -e
".[docs]"`, the README's install): without them these tests fail, saying so.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jax2tf_native
import saved_model_tools

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INSTALL_HINT = 'mkdocs is not installed: pip install -e ".[docs]" (the docs extra)'


def _require_docs_tools():
    try:
        import griffe  # noqa: F401
        import material  # noqa: F401
        import mkdocs  # noqa: F401
        import mkdocstrings_handlers.python  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{INSTALL_HINT} ({e})")


def _mkdocs_config():
    _require_docs_tools()
    from mkdocs.config import load_config
    return load_config(str(ROOT / "mkdocs.yml"))


def _nav_pages(items) -> list[str]:
    pages = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages += _nav_pages(value)
        elif value == "api/":  # tools/mkdocs_hooks.py lists docs/api/ there
            pages += sorted(f"api/{p.name}" for p in (DOCS / "api").glob("*.md"))
        else:
            pages.append(value)
    return pages


def _linked_files_outside_docs() -> list[Path]:
    """Repository files outside docs/ that the pages under docs/ link to (the hook's reading)."""
    spec = importlib.util.spec_from_file_location(
        "mkdocs_hooks", ROOT / "tools" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    targets = set()
    for page in DOCS.rglob("*.md"):
        base = hooks._link_base(page, ROOT)
        for link in hooks._link_targets(base.read_text(encoding="utf-8")):
            target = hooks._resolve(base, link, ROOT)
            if target is not None and not target.is_relative_to(DOCS):
                targets.add(target)
    return sorted(targets)


def test_site_builds_strict(tmp_path):
    _require_docs_tools()
    # Not --quiet: it silences the warnings that strict mode counts, and the build passes.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0, (
        "mkdocs build --strict failed:\n" + "\n".join(problems or [result.stderr[-4000:]]))
    site = tmp_path / "site"
    # The API reference is rendered from the docstrings (ours through mkdocstrings, jax2tf's
    # re-exports by the hook from the installed jax).
    convert_page = (site / "api" / "jax2tf_native.convert" / "index.html").read_text()
    assert "polymorphic_shapes" in convert_page and "Converts a JAX function" in convert_page
    call_tf_page = (site / "api" / "jax2tf_native.call_tf" / "index.html").read_text()
    assert "Calls a TensorFlow function from JAX" in call_tf_page
    # Every repository file outside docs/ that a page links to is in the site under repo/.
    outside = _linked_files_outside_docs()
    assert outside, "no page links outside docs/: this check would test nothing"
    for target in outside:
        relative = target.relative_to(ROOT)
        if target.suffix == ".md":
            folder = relative.parent if target.name == "README.md" else relative.with_suffix("")
            published = site / "repo" / folder / "index.html"
        else:
            published = site / "repo" / relative
        assert published.is_file(), f"{relative} is linked from docs/ but not in the site"


def test_every_public_name_has_an_api_page():
    _require_docs_tools()  # tools.api_pages reads the docstrings with griffe
    pages = {p.stem for p in (DOCS / "api").glob("*.md")}
    for package in (jax2tf_native, saved_model_tools):
        missing = [name for name in package.__all__ if f"{package.__name__}.{name}" not in pages]
        assert not missing, f"{package.__name__}: no docs/api page for {missing}"
    check = subprocess.run([sys.executable, "-m", "tools.api_pages", "--check"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-4000:]


def test_nav_lists_every_page_and_only_pages_that_exist():
    nav = _nav_pages(_mkdocs_config().nav)
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    missing = [p for p in nav if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml's nav lists pages that do not exist: {missing}"
    orphans = sorted(set(on_disk) - set(nav))
    assert not orphans, f"pages under docs/ missing from mkdocs.yml's nav: {orphans}"
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"
