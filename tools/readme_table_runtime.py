"""The README comparison rows that need another process: sharded functions (JAX with 2 CPU
devices, set before JAX starts) and serving on an older TF (a SavedModel run in the venvs of
TF 2.17-2.20 that `saved_model_tools.verify.tf_envs` builds). Used by tools/readme_table_check.py;
`python -m tools.readme_table_runtime --sharded` is the 2-device child.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax.experimental import jax2tf

import jax2tf_native
import saved_model_tools
from saved_model_tools.verify import tf_envs
from tools.readme_table_common import assert_close, outcome

_ROOT = Path(__file__).resolve().parent.parent
OLDER_TF = ("2.17", "2.18", "2.19", "2.20")
_MARK = "ROW: "


def _sharded_lines() -> list[str]:
    """Runs in the 2-device child."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    rows = NamedSharding(mesh, P("x"))
    jitted = jax.jit(lambda v: jnp.sin(v) * 2, in_shardings=rows, out_shardings=rows)
    mapped = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh,
                                   in_specs=P("x"), out_specs=P()))
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    spec = [tf.TensorSpec([4, 2], tf.float32)]
    converters = (jax2tf.convert, jax2tf_native.convert)

    def call(convert, f, how):
        converted = convert(f)
        if how != "eager":
            converted = tf.function(converted, autograph=False, input_signature=spec,
                                    jit_compile=how == "jit_compile")
        assert_close(converted(tf.constant(x)), f(x))

    def trace_and_save(convert, f):
        module = tf.Module()
        module.f = tf.function(convert(f), autograph=False, input_signature=spec)
        module.f.get_concrete_function()
        with tempfile.TemporaryDirectory() as directory:
            tf.saved_model.save(module, directory)

    lines = [f"## Row: sharded functions ({len(jax.devices())} CPU devices for JAX)", "",
             "| check | jax2tf | jax2tf-native |", "|---|---|---|"]
    for how in ("eager", "tf.function", "jit_compile"):
        cells = [outcome(lambda: call(c, jitted, how)) for c in converters]
        lines.append(f"| `jax.jit` with `in/out_shardings` over 2 devices, {how} call == "
                     f"JAX | {cells[0]} | {cells[1]} |")
    cells = [outcome(lambda: trace_and_save(c, mapped)) for c in converters]
    lines.append(f"| `shard_map` + `psum`: trace and `tf.saved_model.save` | {cells[0]} | "
                 f"{cells[1]} |")
    quote = "No registered implementation"
    for how in ("eager", "tf.function"):
        cells = [outcome(lambda: call(c, mapped, how), quote) for c in converters]
        lines.append(f"| `shard_map` + `psum`, {how} call on this CPU host | {cells[0]} | "
                     f"{cells[1]} |")
    return lines + [""]


def sharded_row(lines: list[str]) -> None:
    """The sharded rows, from a child process whose JAX has 2 CPU devices."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT)] + [p for p in [
        os.environ.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-m", "tools.readme_table_runtime", "--sharded"],
                          capture_output=True, text=True, cwd=_ROOT, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the 2-device child failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    lines += [line[len(_MARK):] for line in proc.stdout.splitlines() if line.startswith(_MARK)]


# Loads a SavedModel in the older TF and prints its output (or the error) as JSON.
_RUNNER = """
import json, sys
import numpy as np, tensorflow as tf
x = np.asarray(json.loads(sys.argv[2]), np.float32)
try:
    print(json.dumps({"ok": tf.saved_model.load(sys.argv[1]).f(tf.constant(x)).numpy().tolist()}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


def older_tf_row(lines: list[str]) -> None:
    """A SavedModel of each converter, run in TF 2.17-2.20 (ours exported with target_tf)."""
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    fn = lambda v: jnp.tanh(v @ w) + jnp.sin(v[:, :2])
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    want = np.asarray(jax.jit(fn)(x))
    spec = [tf.TensorSpec([None, 3], tf.float32)]
    lines += ["## Row: serving on an older TF", "",
              "A SavedModel of `tanh(x @ w) + sin(x[:, :2])` (polymorphic batch) loaded and "
              "called in a venv with that TF (`saved_model_tools.verify.tf_envs`), compared with "
              "JAX.", "",
              "| check | jax2tf | jax2tf-native |", "|---|---|---|",
              f"| a target-version option | "
              f"{outcome(lambda: jax2tf.convert(fn, target_tf='2.19'))} | "
              f"{outcome(lambda: jax2tf_native.convert(fn, target_tf='2.19'))} |"]

    def saved(convert, directory: Path) -> Path:
        module = tf.Module()
        module.f = tf.function(convert(), autograph=False, input_signature=spec)
        tf.saved_model.save(module, str(directory))
        return directory

    def run_in(version: str, model: Path) -> str:
        if not tf_envs.is_ready(version):
            return (f"not run: no TF {version} venv here (`jax2tf-native verify DIR --tf "
                    f"{version}` builds it)")
        proc = subprocess.run([str(tf_envs.env_python(version)), "-c", _RUNNER, str(model),
                               json.dumps(x.tolist())], capture_output=True, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
        if proc.returncode != 0:
            return f"fails: the process exits {proc.returncode}"
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if "error" in result:
            cause = [line.strip() for line in result["message"].splitlines()
                     if line.strip() and not line.strip().startswith(("[[", "<", "Detected",
                                                                      "Graph execution"))]
            return f"fails: {result['error']}: {(cause or [''])[0][:110].replace('|', '/')}"
        difference = float(np.max(np.abs(np.asarray(result["ok"]) - want)))
        return "runs, == JAX" if difference <= 1e-5 else (
            f"runs, differs from JAX (max abs {difference:.2g})")

    with tempfile.TemporaryDirectory() as directory:
        peer = saved(lambda: jax2tf.convert(fn, polymorphic_shapes=["(b, 3)"]),
                     Path(directory) / "peer")
        for version in OLDER_TF:
            ours = saved(lambda: jax2tf_native.convert(fn, polymorphic_shapes=["(b, 3)"],
                                                       target_tf=version),
                         Path(directory) / f"ours_{version}")
            lines.append(f"| SavedModel called in TF {version} (ours: "
                         f"`target_tf=\"{version}\"`) | {run_in(version, peer)} | "
                         f"{run_in(version, ours)} |")
        lines.append(f"| `saved_model_tools.save(..., target_tf=\"2.19\")`, then "
                     f"`jax2tf-native verify DIR --tf 2.19` | no such tool (a README recipe) | "
                     f"{_verify_in_older_tf(w, x, Path(directory) / 'saved', '2.19')} |")
    lines.append("")


def _verify_in_older_tf(w: np.ndarray, x: np.ndarray, directory: Path, version: str) -> str:
    """The same model saved with its weights as Variables, verified in that TF's venv."""
    saved_model_tools.save(directory, lambda p, v: jnp.tanh(v @ p["w"]) + jnp.sin(v[:, :2]),
                           {"w": w}, [x[:2]], polymorphic_shapes=["(b, 3)"], target_tf=version)
    proc = subprocess.run([sys.executable, "-m", "saved_model_tools", "verify", str(directory),
                           "--tf", version], capture_output=True, text=True, cwd=_ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=900)
    last = (proc.stdout.strip().splitlines() or [""])[-1].strip()
    return (f"exit {proc.returncode}: {last[:110].replace('|', '/')}" if last
            else f"exit {proc.returncode}")


if __name__ == "__main__" and sys.argv[1:] == ["--sharded"]:
    for line in _sharded_lines():
        print(_MARK + line, flush=True)
