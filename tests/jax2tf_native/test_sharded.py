"""Sharded (multi-device) conversions, checked in one subprocess with 2 CPU devices for JAX.

The main pytest process keeps its single device (other tests assume it), so the checks live in
tests/jax2tf_native/multi_device/sharded_checks.py, run once per session with
XLA_FLAGS=--xla_force_host_platform_device_count=2 and Shardy on and off; each test here asserts
that its check passed, and shows the check's traceback when not.
"""
import json
from pathlib import Path

import pytest

from tools import child_runner

_CHECKS = Path(__file__).parent / "multi_device" / "sharded_checks.py"


def background_jobs(items, directory) -> dict[str, child_runner.Job]:
    """The one child all tests here read, which tests/conftest.py starts when collection ends;
    it writes results.json and its SavedModels into `directory`."""
    return {"sharded": child_runner.Job(
        [str(_CHECKS), str(directory / "results.json"), str(directory)], timeout=3600,
        what="tests/jax2tf_native/multi_device/sharded_checks.py",
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})}


@pytest.fixture(scope="module")
def results(background, background_directory):
    run = background.result("sharded")
    out = background_directory / "results.json"
    assert run.returncode == 0 and out.is_file(), (
        f"sharded_checks.py failed (exit {run.returncode}{run.signal_name}):\n"
        f"{run.output_tail()}")
    return json.loads(out.read_text())


_BOTH = ["check_jit_in_out_shardings", "check_constraints_and_nested_jits",
         "check_gradients_of_sharded_function", "check_polymorphic_batch",
         "check_shard_map_converts_but_runs_only_on_its_devices",
         "check_single_device_mesh_runs", "check_tpu_module_builds_saves_and_fails_only_when_run",
         "check_plain_ops_refuse_a_multi_device_module"]
# SavedModel checks (each verify is a child process) run with Shardy, JAX's default, only.
_SHARDY_ONLY = ["check_flax_nnx_model", "check_saved_model_keeps_shardings",
                "check_save_exported_keeps_shardings",
                "check_saved_model_for_tpu_saves_and_verify_says_it_cannot_run_here"]


@pytest.mark.parametrize("key", [f"{n}[shardy={s}]" for s in ("on", "off") for n in _BOTH]
                         + [f"{n}[shardy=on]" for n in _SHARDY_ONLY])
def test_sharded(results, key):
    assert key in results, f"{key} did not run; ran: {sorted(results)}"
    if results[key].startswith("skipped: "):
        pytest.skip(results[key])
    assert results[key] == "ok", f"{key} failed in the 2-device subprocess:\n{results[key]}"
