"""Shared test setup: quiet TF's C++ logs, and helpers comparing TF results with JAX."""
import dataclasses
import os
import pathlib
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests import parallel  # noqa: E402
from tools import child_runner, full_matrix  # noqa: E402

_BACKGROUND = pytest.StashKey[tuple]()  # (the ChildPool or _OnDemand, its TemporaryDirectory)
# Background children only take the CPU time the suite leaves: this process's tests keep
# their speed, and the children get the cores while a test waits for them.
_BACKGROUND_NICE = 10


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (setup.cfg): one worker per usable core, at most 4 (tests/parallel.py)."""
    return parallel.workers()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """A whole test file per worker at a time, longest first (tests/parallel.py)."""
    return parallel.make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    """Longest files first (tests/parallel.py); and, unless JAX2TF_NATIVE_FULL_MATRIX=1, the
    tests marked `full_matrix` are deselected (pytest's summary counts them as deselected)."""
    parallel.longest_first(items)
    if os.environ.get(full_matrix.ENV) == "1":  # `python -m tools.full_matrix`: every case
        return
    deselected = [item for item in items if item.get_closest_marker("full_matrix")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker("full_matrix")]


def pytest_collection_finish(session):
    """Starts the children that selected tests only wait for, declared by their modules'
    `background_jobs(items, directory) -> {name: child_runner.Job}` (the linear-algebra
    checks, the 2-device checks, the library callers, the fuzzer's slice), so that they run
    beside the rest of the suite, at low CPU priority, as many at a time as there are cores,
    instead of one after another while the suite waits for each. `directory` is the module's
    own (for files its children write), removed when the session ends.

    In a pytest-xdist worker (the default, tests/parallel.py) every worker collects every
    test but runs only those sent to it: there a child starts when a test first asks for it,
    and the worker's scheduling (longest files first) puts those tests early instead."""
    if session.config.option.collectonly:
        return
    by_module: dict = {}
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "background_jobs"):
            by_module.setdefault(module, []).append(item)
    work = tempfile.TemporaryDirectory(prefix="pytest_background_", ignore_cleanup_errors=True)
    jobs = {}
    for module, items in by_module.items():
        directory = _module_directory(work.name, module)
        directory.mkdir()
        for name, job in module.background_jobs(items, directory).items():
            jobs[name] = dataclasses.replace(job, nice=_BACKGROUND_NICE)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pool = _OnDemand(jobs)
    else:
        pool = child_runner.ChildPool(jobs, parallel=len(os.sched_getaffinity(0)))
    session.config.stash[_BACKGROUND] = (pool, work)


class _OnDemand:
    """The background children of an xdist worker: each runs, at full priority, when a test
    first asks for its result (a file's tests all run in one worker: each child runs once)."""

    def __init__(self, jobs: dict[str, child_runner.Job]):
        self._jobs = jobs
        self._results: dict[str, child_runner.Finished] = {}

    def result(self, name: str) -> child_runner.Finished:
        if name not in self._jobs:
            raise AssertionError(f"no child {name!r} here; there are {sorted(self._jobs)}")
        if name not in self._results:
            self._results[name] = child_runner.run(dataclasses.replace(self._jobs[name], nice=0))
        return self._results[name]

    def close(self) -> None:
        """Nothing runs between tests: a child ends before `result` returns."""


def _module_directory(root: str, module) -> pathlib.Path:
    return pathlib.Path(root) / module.__name__


def pytest_sessionfinish(session):
    """Kills the background children still running (a run ended early by -x, a failure or
    Ctrl-C; those not started yet never start), then removes their files."""
    pool, work = session.config.stash.get(_BACKGROUND, (None, None))
    if pool is not None:
        pool.close()
        work.cleanup()


@pytest.fixture(scope="session")
def background(request):
    """The background children (see `pytest_collection_finish`): `background.result(name)`
    waits for one and returns how it ended."""
    return request.config.stash[_BACKGROUND][0]


@pytest.fixture(scope="module")
def background_directory(request) -> pathlib.Path:
    """The directory this module's `background_jobs` was given."""
    return _module_directory(request.config.stash[_BACKGROUND][1].name, request.module)


def assert_tree_allclose(tf_tree, jax_tree, rtol=1e-6, atol=1e-6):
    """TF results equal JAX results leaf by leaf, with the same pytree structure and dtypes."""
    tf_leaves, tf_def = jax.tree_util.tree_flatten(tf_tree)
    jax_leaves, jax_def = jax.tree_util.tree_flatten(jax_tree)
    assert tf_def == jax_def, f"structure {tf_def} != {jax_def}"
    for got, want in zip(tf_leaves, jax_leaves):
        got = np.asarray(got)
        want = np.asarray(want)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def tape_value_and_gradients(f, *xs, loss=None):
    """`(y, grads)`: y = f(*xs) and the gradients of `loss(y)` (default: y itself; TF sums a
    non-scalar target) w.r.t. each of `xs`, taken with one tf.GradientTape watching them.

    Example: `y, (g,) = tape_value_and_gradients(f_tf, x)`.
    """
    # Imported here: conftest loads before test modules that set up the environment for TF.
    import tensorflow as tf
    xs = [tf.convert_to_tensor(x) for x in xs]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
        target = y if loss is None else loss(y)
    return y, tape.gradient(target, xs)
