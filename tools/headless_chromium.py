"""Headless Chromium driven over the DevTools protocol, with the standard library only.

One browser serves many pages: `Browser.open(url)` loads a page and returns what its console
reported (errors, uncaught exceptions, failed requests); `Browser.screenshot(url, path)` also
writes a PNG. The protocol runs over `--remote-debugging-pipe` (the browser reads commands on
its fd 3 and answers on its fd 4, each message JSON ended by a NUL byte), so neither a
websocket library nor a port is needed. Used by tools/site_screenshots.py and
tests/docs/test_site_in_browser.py.

    with Browser() as browser:
        report = browser.open("http://127.0.0.1:8000/")
        assert not report.errors, report.errors
"""
from __future__ import annotations

import base64
import dataclasses
import http.server
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
PAGE_TIMEOUT_S = 30.0
# After the load event a page may still fetch (the search index) and log: wait until the
# network is idle, as the browser reports it, or this long at most.
SETTLE_TIMEOUT_S = 5.0


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclasses.dataclass
class PageReport:
    """What loading one page reported.

    Attributes:
      url: the page's address.
      errors: each console error, uncaught exception and failed request, as one line.
      title: the document's title once loaded.
    """
    url: str
    errors: list[str]
    title: str = ""


class BrowserError(RuntimeError):
    """The browser did not start, answered an error, or did not answer in time."""


class Browser:
    """A headless Chromium; `open` and `screenshot` load pages in one tab, one at a time.

    Args:
      width, height: the viewport in CSS pixels (screenshots are this size times `scale`).
      scale: device pixels per CSS pixel.
    """

    def __init__(self, width: int = 1280, height: int = 900, scale: float = 1.0):
        self.width, self.height, self.scale = width, height, scale
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []

    def __enter__(self) -> "Browser":
        chromium = find_chromium()
        if chromium is None:
            raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
        self._profile = tempfile.mkdtemp(prefix="headless_chromium_")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def child_fds():  # the browser's fd 3 reads our commands, its fd 4 writes its answers
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self._process = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-dev-shm-usage", "--hide-scrollbars",
             "--disable-extensions", "--remote-debugging-pipe", "--font-render-hinting=none",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # pass_fds keeps 3 and 4 open past the closing of the parent's other descriptors,
            # which runs after preexec_fn.
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(to_browser_read)
        os.close(from_browser_write)
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._call("Target.attachToTarget",
                                       {"targetId": target, "flatten": True})["sessionId"]
            for method in ("Page.enable", "Runtime.enable", "Log.enable"):
                self._call(method, session=True)
            self._call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=True)
            self._viewport(self.width, self.height)
        except (BrowserError, OSError):
            self.__exit__(None, None, None)  # no browser left behind
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._call("Browser.close", timeout=5)
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def open(self, url: str, timeout: float = PAGE_TIMEOUT_S,
             settle: bool = True) -> PageReport:
        """Loads `url` and returns its errors.

        It waits for the load event (the page, its scripts, styles and images), and with
        `settle` also for an idle network (what the scripts fetch afterwards, such as the
        search index: +0.5 s or more a page).
        """
        self._events.clear()
        answer = self._call("Page.navigate", {"url": url}, session=True, timeout=timeout)
        if answer.get("errorText"):
            return PageReport(url, [f"navigation failed: {answer['errorText']}"])
        self._wait_for(lambda e: e["method"] == "Page.loadEventFired", timeout, url)
        if settle:
            try:
                self._wait_for(lambda e: e["method"] == "Page.lifecycleEvent"
                               and e["params"]["name"] == "networkIdle", SETTLE_TIMEOUT_S, url)
            except BrowserError:
                pass  # a page polling forever still gets its errors reported
        title = self._call("Runtime.evaluate", {"expression": "document.title",
                                                "returnByValue": True}, session=True)
        return PageReport(url, self._errors(), title["result"].get("value", ""))

    def screenshot(self, url: str, path: str | os.PathLike, full_page: bool = False,
                   scroll_to: str | None = None) -> PageReport:
        """Loads `url` and writes a PNG of the viewport (or of the whole page) to `path`.

        `scroll_to`: a CSS selector scrolled to the top of the viewport first.
        """
        report = self.open(url)
        if scroll_to:
            self._call("Runtime.evaluate", {"expression": (
                f"document.querySelector({json.dumps(scroll_to)}).scrollIntoView()")},
                session=True)
            time.sleep(0.3)  # the theme's header reacts to the scroll on the next frames
        if full_page:  # a viewport as tall as the page: it renders as on a screen
            height = self._call("Page.getLayoutMetrics", session=True)["cssContentSize"]["height"]
            self._viewport(self.width, int(height))
            time.sleep(0.3)
        data = self._call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        if full_page:
            self._viewport(self.width, self.height)
        Path(path).write_bytes(base64.b64decode(data))
        return report

    def _viewport(self, width: int, height: int) -> None:
        self._call("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": self.scale,
                    "mobile": False}, session=True)

    # The protocol.

    def _errors(self) -> list[str]:
        errors = []
        for event in self._events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                text = " ".join(str(a.get("value", a.get("description", "")))
                                for a in params["args"])
                errors.append(f"console.{params['type']}: {text}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details["text"]
                errors.append(f"uncaught exception: {text.splitlines()[0]}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                errors.append(f"{entry['source']}: {entry['text']} {entry.get('url', '')}".strip())
        return errors

    def _call(self, method: str, params: dict | None = None, session: bool = False,
              timeout: float = PAGE_TIMEOUT_S) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        answer = self._read_until(lambda m: m.get("id") == message["id"], timeout, method)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def _wait_for(self, predicate, timeout: float, what: str) -> dict:
        for event in self._events:
            if predicate(event):
                return event
        return self._read_until(lambda m: "method" in m and predicate(m), timeout, what)

    def _read_until(self, predicate, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self._events.append(message)
                if predicate(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer to {what} within {timeout:.0f} s")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError(f"the browser exited while waiting for {what}")
                self._buffer += chunk


class SiteServer:
    """Serves a built site's folder on 127.0.0.1 (a free port) from a thread.

    `url(path)` is the address of a page ("guides/convert/").
    """

    def __init__(self, site_dir: str | os.PathLike):
        self.site_dir = str(site_dir)

    def __enter__(self) -> "SiteServer":
        site_dir = self.site_dir

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=site_dir, **kwargs)

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{path}"
