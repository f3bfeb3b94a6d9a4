"""Node (@tensorflow/tfjs, pure JS CPU backend) and headless Chromium, for the TF.js tests
and benchmarks/tfjs_node.py.

`npm ci --prefix tests/tfjs` installs the pinned package (CI: .ci/run) beside
tests/tfjs/run_model.js, the Node script that runs a model; Debian's `chromium` is the
browser. A missing runtime raises `RuntimeMissing` with the reason: a `unittest.SkipTest`,
so a test that needs it is skipped with that reason.
"""
from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import tempfile
import threading
import unittest
from pathlib import Path

import numpy as np

# The npm package's folder: package.json, package-lock.json, node_modules and run_model.js.
TFJS_DIR = Path(__file__).resolve().parent.parent / "tests" / "tfjs"
TFJS_BUNDLE = TFJS_DIR / "node_modules" / "@tensorflow" / "tfjs" / "dist" / "tf.min.js"
CHROMIUM_TIMEOUT_S = 120


class RuntimeMissing(unittest.SkipTest):
    """Node, the installed @tensorflow/tfjs or Chromium is missing here; the message says which
    and how to install it (pytest reports it as a skip with that reason)."""


def require_node() -> str:
    """The `node` executable, once @tensorflow/tfjs is installed (else `RuntimeMissing`)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeMissing("node is not installed (TF.js tests need Node 18+)")
    if not TFJS_BUNDLE.exists():
        raise RuntimeMissing(
            f"@tensorflow/tfjs is not installed: run `npm ci --prefix {TFJS_DIR}`")
    return node


def require_chromium() -> str:
    """The Chromium executable, once Node's @tensorflow/tfjs is there (else `RuntimeMissing`)."""
    require_node()
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    raise RuntimeMissing("no chromium on PATH (Debian: apt-get install chromium)")


def _request(inputs: dict[str, np.ndarray]) -> dict:
    return {name: {"dtype": str(x.dtype), "shape": list(x.shape), "data": x.ravel().tolist()}
            for name, x in inputs.items()}


def _arrays(outputs: list[dict]) -> list[np.ndarray]:
    return [np.asarray(o["data"], dtype=o["dtype"] if o["dtype"] != "bool" else np.bool_)
            .reshape(o["shape"]) for o in outputs]


def run_in_node(model_dir, inputs: dict[str, np.ndarray], repeat: int = 0):
    """(outputs as numpy arrays in signature order, ms per call or None)."""
    node = require_node()
    script = str(TFJS_DIR / "run_model.js")
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp, "request.json"), Path(tmp, "result.json")
        request.write_text(json.dumps({"inputs": _request(inputs), "repeat": repeat}))
        proc = subprocess.run([node, script, str(model_dir), str(request),
                               str(result)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads(result.read_text())
    return _arrays(data["outputs"]), data["ms_per_call"]


def run_calls_in_node(calls: list[tuple[object, dict[str, np.ndarray]]]) -> list[list]:
    """Runs each (model_dir, inputs) in one Node process; returns each call's outputs (numpy
    arrays in signature order)."""
    node = require_node()
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp, "calls.json"), Path(tmp, "results.json")
        request.write_text(json.dumps([{"model": str(model_dir), "inputs": _request(inputs)}
                                       for model_dir, inputs in calls]))
        proc = subprocess.run([node, str(TFJS_DIR / "run_model.js"), "--calls", str(request),
                               str(result)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [_arrays(r["outputs"]) for r in json.loads(result.read_text())]


_PAGE = """<!doctype html><html><body><pre id="out">running</pre>
<script src="/tfjs/tf.min.js"></script>
<script>
(async () => {
  const report = (body) => fetch('/result', {method: 'POST', body: JSON.stringify(body)});
  try {
    const request = await (await fetch('/request.json')).json();
    const model = await tf.loadGraphModel('/model/model.json');
    const results = [];
    for (const inputs of request.calls) {
      const feed = {};
      for (const [name, s] of Object.entries(inputs)) {
        feed[name] = tf.tensor(s.data, s.shape, s.dtype);
      }
      let out = await model.executeAsync(feed);
      out = Array.isArray(out) ? out : [out];
      const arrays = [];
      for (const t of out) {
        arrays.push({dtype: t.dtype, shape: t.shape, data: Array.from(await t.data())});
      }
      results.push(arrays);
    }
    document.getElementById('out').textContent = 'done';
    await report({results, backend: tf.getBackend(), userAgent: navigator.userAgent});
  } catch (e) {
    await report({error: String(e && e.stack || e)});
  }
})();
</script></body></html>"""


def run_in_chromium(model_dir, calls: list[dict[str, np.ndarray]]):
    """Runs each call's inputs through the model in one headless Chromium page.

    The page (served on 127.0.0.1 by a thread here) loads tf.min.js from node_modules and the
    model over HTTP, and POSTs its outputs back. Returns ([outputs per call], page info).
    """
    chromium = require_chromium()
    model_dir = Path(model_dir)
    request = json.dumps({"calls": [_request(c) for c in calls]}).encode()
    posted: dict = {}
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body: bytes, kind: str):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/":
                return self._send(_PAGE.encode(), "text/html")
            if self.path == "/request.json":
                return self._send(request, "application/json")
            if self.path == "/tfjs/tf.min.js":
                return self._send(TFJS_BUNDLE.read_bytes(), "text/javascript")
            if self.path.startswith("/model/") and "/" not in self.path[len("/model/"):]:
                file = model_dir / self.path[len("/model/"):]
                if file.is_file():
                    return self._send(file.read_bytes(), "application/octet-stream")
            self.send_error(404)

        def do_POST(self):
            posted.update(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._send(b"ok", "text/plain")
            done.set()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             f"http://127.0.0.1:{server.server_address[1]}/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            finished = done.wait(CHROMIUM_TIMEOUT_S)
        finally:
            browser.terminate()
            try:
                _, stderr = browser.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                browser.kill()
                _, stderr = browser.communicate()
            server.shutdown()
            server.server_close()
    assert finished, (f"the page posted no result within {CHROMIUM_TIMEOUT_S} s; chromium's "
                      f"stderr: {stderr.decode(errors='replace')[-2000:]}")
    assert "error" not in posted, posted.get("error")
    return [_arrays(r) for r in posted["results"]], {
        "backend": posted["backend"], "userAgent": posted["userAgent"]}
