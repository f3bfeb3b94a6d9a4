"""`verify`: run a SavedModel as a serving host would, without JAX, and compare with JAX's outputs.

The checks run in a child process in which importing `jax` or `jaxlib` raises ImportError: a
`sys.meta_path` finder is installed before anything else is imported. Blocking is the only honest
test, because TensorFlow 2.21 imports JAX itself when it is installed (through Keras and
tf.lite), so "the model ran in a process where JAX happened not to be imported" proves nothing.
The child records who tried to import JAX and reports it.

In the child, each signature is run
  (a) through `tf.saved_model.load(dir).signatures[name]` (TF2), and
  (b) through the TF1 session path TF Serving uses: `tf.compat.v1.saved_model.loader.load` with
      tag "serve", feeding and fetching the SignatureDef's tensor names;
on the reference inputs jax2tf-native recorded in `assets.extra/` (at least two batch sizes when
the batch is polymorphic), and the outputs are compared with the recorded JAX outputs with the
recorded rtol/atol. The TF Serving warmup requests, if any, are replayed through (b) too: a
warmup request TF Serving cannot run makes it refuse to load the model.

A model without jax2tf-native's manifest gets a smoke run instead: zeros at batch sizes 1 and 2
(when the input shapes leave only the batch open), checking that it runs and that (a) and (b)
agree; the report says it had no references.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from saved_model_tools.inspect.saved_model import check_readable
from saved_model_tools.verify.report import OutputCheck, VerifyError, VerifyReport

_PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Run as `python -I -c _CHILD_BOOTSTRAP PROJECT_ROOT REQUEST_FILE` (`-I`: no PYTHON* variables,
# no user site-packages, no current directory on sys.path). Nothing but `sys`, the import-free
# `__init__`s of saved_model_tools and saved_model_tools.verify and `jax_blocker` is imported
# before the blocker is installed.
_CHILD_BOOTSTRAP = r"""
import sys
sys.path.insert(0, sys.argv[1])
from saved_model_tools.verify import jax_blocker
attempts = jax_blocker.install()
from saved_model_tools.verify import child
sys.exit(child.main(sys.argv[2], attempts))
"""


def verify(saved_model_dir: str | Path, *, batch_sizes: Sequence[int] | None = None,
           timeout: float = 600.0, python: str | Path | None = None) -> VerifyReport:
    """Loads and runs a SavedModel without JAX and compares it with the recorded JAX outputs.

    Args:
      saved_model_dir: the SavedModel directory.
      batch_sizes: batch sizes to run; default every recorded reference (or 1 and 2 for a smoke
        run). A size without a recorded reference runs on the reference inputs' rows repeated to
        that size and checks only that both load paths agree and the shapes are as declared.
      timeout: seconds before the child process is killed.
      python: the interpreter of the child process (default this one): e.g. that of a venv
        with an older TensorFlow, from `tf_envs.ensure_tf_env("2.19")`, to verify the model in
        the TF that will serve it.

    Returns:
      A `VerifyReport`; `report.ok` is True only when every output matched.

    Raises:
      saved_model_tools.inspect.SavedModelReadError: no such directory, no saved_model.pb, or a
        corrupt one (the message says which and how to fix it).
      ValueError: bad `batch_sizes`.
      VerifyError: the child process crashed or timed out (its last output is in the message).

    Example:
        >>> from saved_model_tools.demo.saved_model import small_saved_model
        >>> report = verify(small_saved_model())
        >>> report.status, report.ok, report.jax_imported
        ('passed', True, False)
    """
    if batch_sizes is not None:
        batch_sizes = tuple(batch_sizes)
        if not batch_sizes or any(not isinstance(b, int) or isinstance(b, bool) or b < 1
                                  for b in batch_sizes):
            raise ValueError(f"batch_sizes must be positive ints, got {batch_sizes!r}. Fix: e.g. "
                             f"batch_sizes=(1, 8).")
    directory = Path(saved_model_dir).resolve()
    # Fails here, before a child is started, for a missing directory, a corrupt graph or
    # checkpoint index, missing variables, or a manifest that does not match the graph.
    check_readable(directory)

    with tempfile.TemporaryDirectory(prefix="jax2tf_native_verify_") as work:
        request = Path(work) / "request.json"
        result = Path(work) / "result.json"
        request.write_text(json.dumps({"dir": str(directory), "batch_sizes": batch_sizes,
                                       "result": str(result)}))
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        start = time.perf_counter()
        try:
            # -I: no PYTHON* variables, no user site-packages, no current directory on sys.path.
            proc = subprocess.run(
                [str(python or sys.executable), "-I", "-c", _CHILD_BOOTSTRAP, str(_PROJECT_ROOT),
                 str(request)],
                capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise VerifyError(f"verifying {directory} took over {timeout:.0f} s; the child "
                              f"process was killed. Fix: pass a larger timeout=.") from None
        seconds = time.perf_counter() - start
        if not result.is_file():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise VerifyError(f"the verify child process exited with code {proc.returncode} "
                              f"without a result. Its last output:\n{tail}")
        raw = json.loads(result.read_text())
    return VerifyReport(
        path=str(directory), status=raw["status"],
        checks=tuple(OutputCheck(**c) for c in raw["checks"]),
        had_references=raw["had_references"], has_manifest=raw["has_manifest"],
        batch_sizes=tuple(raw["batch_sizes"]),
        jax_imported=raw["jax_imported"], blocked_jax_imports=tuple(raw["blocked_jax_imports"]),
        tensorflow_version=raw["tensorflow_version"], errors=tuple(raw["errors"]),
        seconds=seconds, not_runnable_here=tuple(raw.get("not_runnable_here", ())))
