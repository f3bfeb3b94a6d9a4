"""The documentation site builds in strict mode, every public name has its API page, the nav
lists every page under docs/ (and nothing else), and the built pages load in headless Chromium
without console errors.

mkdocs, mkdocs-material and mkdocstrings come with the `docs` extra (`pip install -e
".[docs]"`, the README's install): without them these tests fail, saying so.
"""
import html
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jax2tf_native
import saved_model_tools
from tools import headless_chromium

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


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """`mkdocs build --strict` of the site, once for this module: (the build's output, the
    site's folder)."""
    _require_docs_tools()
    site = tmp_path_factory.mktemp("site") / "site"
    # Not --quiet: it silences the warnings that strict mode counts, and the build passes.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    return result, site


def test_site_builds_strict(built_site):
    result, site = built_site
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0, (
        "mkdocs build --strict failed:\n" + "\n".join(problems or [result.stderr[-4000:]]))
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


def _built(built_site) -> Path:
    result, site = built_site
    if result.returncode != 0:
        pytest.fail("the site did not build (test_site_builds_strict says why)", pytrace=False)
    return site


def _visible_text(html_text: str) -> str:
    """What a reader sees of a page: its HTML without comments, scripts and tags."""
    html_text = re.sub(r"<!--.*?-->|<script\b.*?</script>|<style\b.*?</style>", " ", html_text,
                       flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", html_text))


def test_built_pages_load_in_chromium_without_console_errors(built_site):
    """Every built page, loaded from 127.0.0.1 in one headless Chromium: no console error,
    uncaught exception or failed request (a missing image, a script from a server an offline
    reader cannot reach). The first page also waits for what its scripts fetch afterwards
    (the search index), which every page shares."""
    site = _built(built_site)
    if headless_chromium.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs "
                    "it): the built pages were not loaded in a browser")
    pages = sorted(p.parent.relative_to(site).as_posix() for p in site.rglob("index.html"))
    pages = ["" if p == "." else f"{p}/" for p in pages]
    assert "" in pages and "api/" in pages and len(pages) > 50, pages
    errors, started = [], time.monotonic()
    with headless_chromium.SiteServer(site) as server, headless_chromium.Browser() as browser:
        for index, page in enumerate(pages):
            report = browser.open(server.url(page), settle=index == 0)
            errors += [f"/{page}: {error}" for error in report.errors]
            assert report.title.endswith("jax2tf-native"), (page, report.title)
    print(f"{len(pages)} pages loaded in {time.monotonic() - started:.1f} s")
    assert not errors, "console errors:\n" + "\n".join(errors)


def test_api_pages_have_one_title_and_typed_parameters(built_site):
    site = _built(built_site)
    for page in (site / "api").glob("*/index.html"):
        titles = re.findall(r"<h1\b", page.read_text(encoding="utf-8"))
        assert len(titles) == 1, f"{page.parent.name}: {len(titles)} <h1> headings"
    # The page's one heading is the name users call; parameters documented together
    # ("rtol, atol: ...") get a row each, with the type from the signature.
    page = (site / "api" / "jax2tf_native.check_grads_tf" / "index.html").read_text()
    heading = _visible_text(re.search(r"<h1\b.*?</h1>", page, re.DOTALL).group(0))
    assert "jax2tf_native.check_grads_tf" in heading and "grad_check" not in heading
    rows = {_visible_text(row).split()[0]: " ".join(_visible_text(row).split())
            for row in re.findall(r"<tr\b.*?</tr>", page, re.DOTALL)}
    for name in ("rtol", "atol"):
        assert rows[name].startswith(f"{name} float | None "), rows[name]
    assert rows["order"].startswith("order int "), rows["order"]


def test_published_pages_carry_no_internal_issue_numbers(built_site):
    """The tracker's numbers ("issue 30", "issue 27 point 5") mean nothing to a reader: the
    pages say what changed and when instead."""
    site = _built(built_site)
    found = []
    for page in sorted(site.rglob("*.html")):
        text = _visible_text(page.read_text(encoding="utf-8"))
        found += [f"{page.relative_to(site)}: ...{text[max(0, m.start() - 50):m.end()]}"
                  for m in re.finditer(r"\bissues? #?\d+", text, re.IGNORECASE)]
    assert not found, "\n".join(found)


def test_header_shows_the_version_and_the_site_needs_no_other_server(built_site):
    site = _built(built_site)
    home = (site / "index.html").read_text(encoding="utf-8")
    version = re.search(r'class="j2t-version"[^>]*>v([^<]+)<', home)
    assert version and version.group(1) == jax2tf_native.__version__
    # Fonts, scripts and styles come with the site: it works offline.
    external = sorted({m.group(1) for page in site.rglob("*.html")
                       for m in re.finditer(r'<(?:link|script)\b[^>]*(?:href|src)="(https?://[^"]+)"',
                                            page.read_text(encoding="utf-8"))})
    assert not external, external
