"""saved_model_tools.write.references: JAX references lowered in the caller's thread, compiled and
run on another (save() overlaps them with TF's write), equal to jax.jit's outputs."""
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from saved_model_tools.write import references


def _in_thread(fn):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()))
    thread.start()
    thread.join()
    return out["value"]


def test_equals_jax_jit_when_run_on_another_thread():
    params = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    fn = lambda p, x: {"y": jnp.tanh(x @ p["w"]), "n": jnp.sum(x, axis=1)}
    got = _in_thread(references.lower_jax_outputs(fn, params, [x]))
    want = jax.jit(fn)(params, x)
    assert set(got) == {"y", "n"}
    for k in got:
        assert isinstance(got[k], np.ndarray)
        np.testing.assert_array_equal(got[k], np.asarray(want[k]))


def test_the_callers_x64_context_holds_on_the_other_thread():
    # jax.enable_x64 is thread-local: lowering in the caller's thread keeps float64.
    x = np.array([1.0, 1.0 + 2.0 ** -40], np.float64)
    with jax.enable_x64(True):
        run = references.lower_jax_outputs(lambda p, x: x * p, np.float64(3.0), [x])
        want = np.asarray(jax.jit(lambda p, x: x * p)(np.float64(3.0), x))
    got = _in_thread(run)
    assert got.dtype == np.float64 and want.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    assert got[1] != got[0]  # the difference float32 would lose


def test_in_background_returns_and_reraises():
    with references.in_background(lambda: 6 * 7) as pending:
        assert pending.result() == 42
    with pytest.raises(ZeroDivisionError):
        with references.in_background(lambda: 1 / 0) as pending:
            pending.result()


def test_in_background_leaves_no_thread_running_when_the_body_fails():
    release, finished, workers = threading.Event(), threading.Event(), []

    def compute():
        workers.append(threading.current_thread())
        release.wait(timeout=60)  # set by the body below; the bound only stops a broken test
        finished.set()
        return "done"

    with pytest.raises(RuntimeError, match="write failed"):
        with references.in_background(compute) as pending:
            # `compute` cannot finish before this: it waits for `release`.
            assert not finished.is_set()
            release.set()
            raise RuntimeError("write failed")
    # Had the exit not waited, the raise would have reached here with `compute` still running.
    assert finished.is_set() and pending.done() and pending.result() == "done"
    assert len(workers) == 1 and not workers[0].is_alive()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("jax_references")]
