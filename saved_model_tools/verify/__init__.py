"""`verify`: run a SavedModel as a serving host would, without JAX, and compare with JAX's outputs.

  run         -- `verify(dir)`: checks the directory, starts the child process, returns a report.
  report      -- `VerifyReport`, `OutputCheck`, `VerifyError` and the exit codes.
  jax_blocker -- the child's first import: makes `import jax` raise ImportError.
  child       -- the child process: loads the model both ways TF Serving and TF2 do, runs it.
  cases       -- which inputs each signature is called with, and how its outputs are compared.
  compare     -- the element-wise rule (NaN, infinities, rtol/atol), shared with `tflite`.
  tf_envs     -- `verify --tf VERSION`: venvs with another TensorFlow to verify in.

This `__init__` imports nothing: the child process imports `saved_model_tools.verify.jax_blocker`
before anything else, and a package `__init__` that imported TensorFlow would load it (and JAX
with it) before the blocker is installed. The public names of `run` and `report`, and the
modules, resolve here on first use (`saved_model_tools.verify.verify`,
`saved_model_tools.verify.VerifyReport`, `saved_model_tools.verify.tf_envs`).
"""
from saved_model_tools.lazy_names import lazy_names

_PUBLIC = {
    "verify": "run",
    **dict.fromkeys(("VerifyReport", "OutputCheck", "VerifyError", "EXIT_PASSED", "EXIT_FAILED",
                     "EXIT_UNREADABLE", "EXIT_NO_REFERENCES", "EXIT_NOT_RUNNABLE_HERE",
                     "SMOKE_BATCH_SIZES", "SERVE_TAG"), "report"),
}


_SUBMODULES = frozenset({"run", "report", "jax_blocker", "child", "cases", "compare", "tf_envs"})

__getattr__ = lazy_names(__name__, _PUBLIC, _SUBMODULES)


__all__ = sorted(_PUBLIC)
