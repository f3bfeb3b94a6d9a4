"""Screenshots of the documentation site, taken with headless Chromium, for review.

    python -m tools.site_screenshots [--out tools/results/site_screenshots] [--site-dir DIR]

Builds the site (`mkdocs build --strict` into a temporary folder, or uses `--site-dir`),
serves it on 127.0.0.1 and writes one PNG per page in `PAGES` (home, a guide, the API index,
an API page, the benchmarks page), 1440x900 CSS pixels (a laptop screen), the top of each
page (the home page whole; the benchmarks page also scrolled to its plot). It fails when a
page reports a console error. Needs mkdocs (the `docs` extra) and
Chromium on PATH (Debian: apt-get install chromium). The committed PNGs are in
tools/results/site_screenshots/ (outside docs/, so the site does not carry them).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.headless_chromium import Browser, SiteServer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tools" / "results" / "site_screenshots"
# (file name, path in the site, the whole page or the first screen).
PAGES = (
    ("home.png", "", True),
    ("guide_convert.png", "guides/convert/", False),
    ("api_index.png", "api/", False),
    ("api_convert.png", "api/jax2tf_native.convert/", False),
    ("benchmarks.png", "benchmarks/", False),
    ("benchmarks_plot.png", "benchmarks/", "img[src$='latest.png']"),
)
WIDTH, HEIGHT = 1440, 900


def build_site(site_dir: str | os.PathLike) -> None:
    """`mkdocs build --strict` of this repository into `site_dir`; raises on failure."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    if result.returncode != 0:
        raise SystemExit("mkdocs build --strict failed:\n" + result.stderr[-4000:])


def take(site_dir: str | os.PathLike, out: Path) -> list[str]:
    """Writes the screenshots into `out`; returns the console errors of the pages."""
    out.mkdir(parents=True, exist_ok=True)
    errors = []
    with SiteServer(site_dir) as server, Browser(WIDTH, HEIGHT) as browser:
        for name, path, extent in PAGES:
            report = browser.screenshot(
                server.url(path), out / name, full_page=extent is True,
                scroll_to=extent if isinstance(extent, str) else None)
            errors += [f"{path or '/'}: {e}" for e in report.errors]
            print(f"{out / name}: {report.title}")
    return errors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--site-dir", type=Path, help="a built site (default: build one)")
    args = parser.parse_args(argv)
    if args.site_dir:
        errors = take(args.site_dir, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            build_site(tmp)
            errors = take(tmp, args.out)
    for error in errors:
        print(f"console error: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
