"""Virtual environments with one TensorFlow version each, for `jax2tf-native verify DIR --tf 2.19`.

A serving fleet's TF is often older than the one installed here; the honest check that a model
runs there is to run it there. `ensure_tf_env("2.19")` creates, once, a venv under a cache
directory (`$JAX2TF_NATIVE_TF_ENVS`, default `~/.cache/jax2tf_native/tf_envs`, shared with
tools/tf_version_matrix.py) and installs `tensorflow-cpu==2.19.*` into it from the package index
with pip; later calls reuse it. Building takes one to a few minutes (measured on the 2-core CI
machine: 73-119 s for TF 2.19 with pip's cache warm). A lock serializes concurrent builders, and a
build that died half way is started again.

Example (not run as a doctest: it builds a venv and downloads that TensorFlow, ~600 MB)::

    python = ensure_tf_env("2.19", progress=print)
    subprocess.run([str(python), "-c", "import tensorflow"])
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

_VERSION_RE = re.compile(r"^2\.(\d+)$")
_MARKER = ".installed"


class TfEnvError(RuntimeError):
    """The TF environment could not be created (the message has pip's last lines and the fix)."""


def cache_dir() -> Path:
    """Where the environments live: $JAX2TF_NATIVE_TF_ENVS or ~/.cache/jax2tf_native/tf_envs."""
    override = os.environ.get("JAX2TF_NATIVE_TF_ENVS")
    if override:
        return Path(override)
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "jax2tf_native" / "tf_envs"


def check_version(version: str) -> str:
    """"2.19" as given, or ValueError naming the expected form ("major.minor", TF 2.x)."""
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ValueError(f"--tf expects a TensorFlow major.minor version such as 2.19, got "
                         f"{version!r}.")
    return version


def env_python(version: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / f"tf-{check_version(version)}" / "bin" / "python"


def is_ready(version: str, cache: Path | None = None) -> bool:
    """True when the environment for `version` was built completely before."""
    return (env_python(version, cache).parent.parent / _MARKER).is_file()


def ensure_tf_env(version: str, *, cache: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> Path:
    """The Python of a venv with tensorflow-cpu==<version>.* (built once, then reused).

    Args:
      version: TF "major.minor", e.g. "2.19".
      cache: the cache directory (default `cache_dir()`).
      progress: called with one line per step (and pip's Collecting/Installing lines).

    Raises:
      ValueError: a malformed version.
      TfEnvError: venv creation or the pip install failed (e.g. no such version for this
        Python, or no network); nothing half-built is left marked as ready.
    """
    report = progress or (lambda line: None)
    python = env_python(version, cache)
    venv = python.parent.parent
    if (venv / _MARKER).is_file():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"tf-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same venv
        if (venv / _MARKER).is_file():
            return python
        started = time.perf_counter()
        if venv.exists():
            report(f"removing the incomplete environment {venv}")
            shutil.rmtree(venv)
        report(f"creating a Python venv for TensorFlow {version} in {venv} (once; later runs "
               f"reuse it)")
        _run([sys.executable, "-m", "venv", str(venv)], report, "python -m venv")
        report(f"installing tensorflow-cpu=={version}.* with pip (one to a few minutes)")
        _run([str(python), "-m", "pip", "install", "--progress-bar", "off",
              "--disable-pip-version-check", f"tensorflow-cpu=={version}.*"], report,
             f"pip install tensorflow-cpu=={version}.*")
        installed = subprocess.run(
            [str(python), "-c", "import tensorflow as tf; print(tf.__version__)"],
            capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        got = installed.stdout.strip().splitlines()[-1] if installed.stdout.strip() else ""
        if installed.returncode != 0 or not got.startswith(version + "."):
            raise TfEnvError(f"TensorFlow {version} does not import in {venv} (got {got!r}): "
                             f"{installed.stderr.strip()[-800:]}. Fix: delete {venv} and retry.")
        (venv / _MARKER).write_text(f"tensorflow {got}, built in "
                                    f"{time.perf_counter() - started:.0f} s\n")
        report(f"TensorFlow {got} ready in {time.perf_counter() - started:.0f} s")
    return python


def _run(command: list[str], report: Callable[[str], None], what: str) -> None:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        if line.startswith(("Collecting", "Installing", "Successfully", "ERROR")):
            report(f"  {line}")
    if proc.wait() != 0:
        shown = "\n".join(t for t in tail if not t.startswith("WARNING: Location"))
        raise TfEnvError(f"{what} failed (exit {proc.returncode}). Its last output:\n{shown}\n"
                         f"Fix: check that the package index is reachable and has that version "
                         f"for Python {sys.version_info.major}.{sys.version_info.minor} "
                         f"(pip index versions tensorflow-cpu).")
