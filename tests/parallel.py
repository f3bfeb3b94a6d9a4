"""How `python -m pytest` spreads the suite over the machine's cores (pytest-xdist, `-n auto`
in setup.cfg): which tests go together to one worker, in what order, and how many workers.

- One test file is one unit of work: a worker runs a whole file, so that a file's module-scoped
  fixtures (exported models, SavedModels written once for many tests) are built once. The
  exceptions: `SPLIT_FILES`, whose tests are each one long child process of their own (each
  test goes to whichever worker is free), and `GROUPED_DIRS`, whose files share models built
  once per process (tests/consumers/models.py `served`): one unit for the whole folder.
- Longest first: the units in `LONGEST_FIRST` (the CPU time each took in a profiled run of
  the whole suite on 2 cores, most first) start before the rest, so that the last units to run
  are short and the workers end close together.
- Workers: one per core this process may use, at most `MAX_WORKERS` (each holds TF, JAX and
  its compiles: 2-3 GB by the end of a run).

Run one file, or debug, without workers: `python -m pytest -n 0 tests/...`.
"""
from __future__ import annotations

import os

# Files whose tests are each one long child process (tests/jax2tf_native/linalg_isolated/*):
# side by side on two workers rather than one after another on one.
SPLIT_FILES = frozenset({"tests/jax2tf_native/test_linalg_primitives.py"})
# Folders whose files are one unit: they share what a process builds once.
GROUPED_DIRS = ("tests/consumers/",)
# Profiled CPU seconds per file on 2 cores (`.ci/run`, per-test self + children), most first.
LONGEST_FIRST = (
    "tests/jax2tf_native/test_linalg_primitives.py",    # its four children, ~700 s
    "tests/docs/test_doc_examples.py",                  # every docs page, 2 at a time, 339 s
    "tests/backcompat/test_backcompat.py",              # 140 s
    "tests/jax2tf_native/test_linalg_portable.py",      # 159 s
    "tests/consumers/",                                 # Core ML, ONNX, tensorflowjs: 195 s
    "tests/jax2tf_native/test_library_callers.py",      # two Keras children, ~120 s
    "tests/fuzz/test_fuzz_slice.py",                    # the fuzzer's CI slice, ~90 s
    "tests/saved_model_tools/test_writer.py",           # 82 s
    "tests/jax2tf_native/test_grad_check.py",           # 75 s
    "tests/jax2tf_native/frameworks/test_flax_linen.py",    # 63 s
    "tests/jax2tf_native/test_sharded.py",              # its 2-device child, 60 s
    "tests/tf_ops/plain/test_edge_values.py",           # 58 s
    "tests/tfjs/test_convert_jax.py",                   # 55 s
    "tests/tfjs/test_tfjs_export.py",                   # 49 s
    "tests/saved_model_tools/test_plain_bf16_resnet.py",    # 46 s
    "tests/jax2tf_native/test_call_tf_polymorphic.py",  # 46 s
    "tests/reliability/test_crash_safe_save.py",        # 43 s
    "tests/docs/test_site.py",                          # 39 s
)
MAX_WORKERS = 4


def workers() -> int:
    """How many workers `-n auto` starts: the usable cores, at most `MAX_WORKERS`."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


def file_of(nodeid: str) -> str:
    """"tests/a.py::test_x[1]" -> "tests/a.py"."""
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, itself in a `SPLIT_FILES` file, or its
    folder in `GROUPED_DIRS`."""
    path = file_of(nodeid)
    if path in SPLIT_FILES:
        return nodeid
    return next((folder for folder in GROUPED_DIRS if path.startswith(folder)), path)


def longest_first(items: list) -> None:
    """Reorders collected `items` in place: those of `LONGEST_FIRST` units first, in that
    order, the rest after them in collection order (the order within a unit is kept)."""
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(file_of(item.nodeid), rank.get(
        unit_of(item.nodeid), len(rank))))


def make_scheduler(config, log):
    """pytest-xdist's load-by-scope scheduler with `unit_of` as the scope and the collection
    order kept (xdist would otherwise sort scopes by their number of tests)."""
    from xdist.scheduler import LoadScopeScheduling

    class OneFilePerUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return OneFilePerUnit(config, log)
