"""Peak memory and time of writing a SavedModel with large parameters (issue 30).

Each writer runs in a process of its own (the order alternates round by round), on an MLP of
`--layers` dense layers `--width` wide (default 8 x 8192 x 8192 float32 = 2 GiB of parameters)
with a polymorphic batch. The child builds the parameters, then resets its peak RSS
(/proc/self/clear_refs) and reads its RSS ("before"); the row's memory is the peak RSS
(VmHWM) during the write minus "before", also as a multiple of the parameters' bytes:

- `jax2tf recipe`: the peer's documented recipe (tf.Variables + `jax.experimental.jax2tf.convert`
  + `tf.saved_model.save`, `benchmarks.serving.save_peer_recipe`), numpy parameters;
- `save`: `saved_model_tools.save`, numpy parameters;
- `save_exported`: `saved_model_tools.save_exported` of the model's `jax.export` artifact
  (exported from shapes before "before"), numpy parameters; the artifact as an `Exported`
  (`jax2tf_native.deserialize` of its bytes, before "before");
- `save_exported from bytes`: the same from the serialized bytes, which `save_exported` first
  checks in a sandbox child process (`artifact_sandbox`: a Python start and a JAX import,
  whatever the model's size);
- `save_model`: `saved_model_tools.save_model` of a Flax NNX model (parameters: jax.Arrays);
- `convert_model`: `jax2tf_native.convert_model` of that NNX model + `tf.saved_model.save`;
- `save bfloat16`: `save` with bfloat16 parameters (the row's "variables" column: bytes of
  variables/ on disk); XLA on CPU computes the reference outputs' bfloat16 dots in float32 and,
  by default, converts every layer's weights before the first dot;
- `save bfloat16 with XLA_FLAGS=...`: the same with XLA's concurrency-optimized scheduler off (set
  before the process starts), which converts one layer at a time.

`--big-gib N` (run it alone, when the machine has memory to spare: `free -g`) writes an N GiB
model with `save` from parameter-loading functions (the large-model route: no copy of the
parameters besides the Variables), then in fresh processes loads it with TF alone (JAX
blocked), runs `verify` and `inspect`; it reports each step's peak RSS above its process's
RSS before the step (for `verify`: the peak of its JAX-free child, whose TF import alone is
measured too).

Run: `python -m benchmarks.save_memory [--rounds 3]`; `python -m benchmarks.save_memory
--big-gib 6`; writes results/save_memory.md (and save_memory_big.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
PEER = "jax2tf recipe"
BF16_LOW = "save bfloat16 with XLA_FLAGS=" + (
    LOW_MEMORY_XLA_FLAGS := "--xla_cpu_enable_concurrency_optimized_scheduler=false")
EXPORTED_BYTES = "save_exported from bytes"
WRITERS = (PEER, "save", "save_exported", EXPORTED_BYTES, "save_model", "convert_model",
           "save bfloat16", BF16_LOW)


def _status() -> dict[str, float]:
    """VmRSS and VmHWM of this process, in bytes."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


def reset_peak() -> int:
    """Resets this process's peak RSS to its current RSS; returns that RSS in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status()["VmRSS"]


def peak_rss() -> int:
    return _status()["VmHWM"]


def _layer(i: int, width: int, dtype):
    """Layer i's weights, made in place (no temporary): a deterministic scaled pattern."""
    import numpy as np
    w = np.empty((width, width), dtype)
    w.fill(1.0 / width)
    w[i % width] = (i + 1) / width  # one distinct row per layer
    return w


def _apply(params, x):
    import jax.numpy as jnp
    for layer in params:
        x = jnp.tanh(x @ layer["w"])
    return x


def _nnx_mlp(layers: int, width: int):
    """A Flax NNX MLP with the same weights (jax.Arrays, as a trained NNX model holds them)."""
    import jax.numpy as jnp
    from flax import nnx
    import numpy as np

    class Mlp(nnx.Module):
        # Named attributes, not an nnx.List: NNX states key a list by int, and TF's trackable
        # dict (SavedModel) refuses int keys (a separate problem from memory).
        def __init__(self):
            for i in range(layers):
                setattr(self, f"layer{i}", nnx.Param(jnp.asarray(_layer(i, width, np.float32))))

        def __call__(self, x):
            for i in range(layers):
                x = jnp.tanh(x @ getattr(self, f"layer{i}")[...])
            return x

    return Mlp()


def child(writer: str, layers: int, width: int, out: str) -> dict:
    """Runs one writer in this process; returns its row."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import jax
    import numpy as np
    import tensorflow as tf
    import jax2tf_native
    import saved_model_tools
    # Imported before "before": the package resolves these on first use.
    import saved_model_tools.write.exported  # noqa: F401
    import saved_model_tools.write.framework_models  # noqa: F401
    from benchmarks import serving
    from flax import nnx

    label = writer
    if writer == BF16_LOW:
        writer = "save bfloat16"
        assert LOW_MEMORY_XLA_FLAGS in os.environ.get("XLA_FLAGS", "")
    dtype = jax.numpy.bfloat16 if writer == "save bfloat16" else np.float32
    x = np.ones((2, width), np.float32)
    poly = f"(b, {width})"
    if writer in ("save_model", "convert_model"):
        model = _nnx_mlp(layers, width)
        # The host-to-device copies run asynchronously; "before" counts them done.
        jax.block_until_ready(jax.tree.leaves(nnx.state(model)))
    else:
        params = [{"w": _layer(i, width, dtype)} for i in range(layers)]
        if writer == "save bfloat16":
            x = x.astype(dtype)
    if writer in ("save_exported", EXPORTED_BYTES):
        specs = [{"w": jax.ShapeDtypeStruct((width, width), dtype)} for _ in range(layers)]
        x_spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape(poly), np.float32)
        blob = jax.export.export(jax.jit(_apply))(specs, x_spec).serialize(vjp_order=1)
        # From bytes, save_exported checks them in its sandbox child first (timed); else they
        # are checked (the same sandbox) before "before".
        artifact = blob if writer == EXPORTED_BYTES else jax2tf_native.deserialize(blob)
        writer = "save_exported"
    param_bytes = layers * width * width * np.dtype(dtype).itemsize
    before = reset_peak()
    start = time.perf_counter()
    if writer == PEER:
        serving.save_peer_recipe(out, _apply, params, x, poly)
    elif writer in ("save", "save bfloat16"):
        saved_model_tools.save(out, _apply, params, [x], polymorphic_shapes=[poly],
                               input_names=["x"], output_names=["y"])
    elif writer == "save_exported":
        saved_model_tools.save_exported(out, artifact, params=params, input_names=["x"],
                                        output_names=["y"])
    elif writer == "save_model":
        saved_model_tools.save_model(out, model, [x], polymorphic_shapes=[poly],
                                     input_names=["x"], output_names=["y"])
    elif writer == "convert_model":
        converted = jax2tf_native.convert_model(model, polymorphic_shapes=[poly])
        spec = tf.TensorSpec((None, width), tf.float32, name="x")
        converted.serve = tf.function(lambda x: {"y": converted(x)}, jit_compile=True,
                                      autograph=False, input_signature=[spec])
        tf.saved_model.save(converted, out,
                            signatures={"serving_default": converted.serve.get_concrete_function()},
                            options=tf.saved_model.SaveOptions(experimental_custom_gradients=True))
    seconds = time.perf_counter() - start
    peak = peak_rss()
    variables = sum(p.stat().st_size for p in (Path(out) / "variables").rglob("*") if p.is_file())
    return {"writer": label, "seconds": seconds, "before": before, "peak_above": peak - before,
            "param_bytes": param_bytes, "variables_bytes": variables}


def _run_child(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    if BF16_LOW in args:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + LOW_MEMORY_XLA_FLAGS).strip()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.save_memory", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def measure(rounds: int, layers: int, width: int, writers) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="save_memory_") as workdir:
        for r in range(rounds):
            order = list(writers) if r % 2 == 0 else list(reversed(writers))
            for writer in order:
                out = f"{workdir}/{writer.replace(' ', '_')}_{r}"
                # The previous writer's 2 GiB may still be in the page cache as dirty pages:
                # flushed here, its write-back does not slow the next writer's timed write (it
                # did, by up to 1.3x for whichever writer came next, in the 2026-11-27 runs).
                os.sync()
                row = _run_child(["--child", writer, "--layers", str(layers), "--width",
                                  str(width), "--out", out])
                row["round"] = r
                rows.append(row)
                subprocess.run(["rm", "-rf", out], check=True)
                print(f"round {r} {writer}: {row['seconds']:.1f} s, peak +"
                      f"{_gib(row['peak_above'])} ({row['peak_above'] / row['param_bytes']:.2f}x)",
                      flush=True)
    return rows


def _median(values):
    return harness.spread(values)["median"]


def report(rows: list[dict], rounds: int, layers: int, width: int) -> str:
    peer = {r["round"]: r["seconds"] for r in rows if r["writer"] == PEER}
    load = os.getloadavg()
    command = " ".join(["python -m benchmarks.save_memory", *sys.argv[1:]])
    lines = [
        "# Peak memory and time of writing 2 GiB of parameters", "",
        f"`{command}`: an MLP of {layers} dense layers "
        f"{width} wide (polymorphic batch), each writer in its own process, order alternating "
        f"round by round, the page cache's dirty pages flushed (`sync`) before each; {rounds} "
        f"rounds. Load average at the end {load[0]:.1f}, "
        f"{load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs (shared machine). Memory: peak "
        f"RSS during the write minus the RSS before it (the parameters already built), "
        f"median over rounds (max in brackets); x = multiple of the parameters' bytes. Time: "
        f"median wall seconds; ratio: median of the per-round ratios to the recipe's time in "
        f"the same round.", "",
        "| writer | parameters | peak above before | x params | time | time / recipe | "
        "variables/ on disk |",
        "|---|---:|---:|---:|---:|---:|---:|"]
    for writer in WRITERS:
        mine = [r for r in rows if r["writer"] == writer]
        if not mine:
            continue
        peaks = [r["peak_above"] for r in mine]
        ratios = [r["seconds"] / peer[r["round"]] for r in mine if r["round"] in peer]
        lines.append(
            f"| {writer} | {_gib(mine[0]['param_bytes'])} | {_gib(_median(peaks))} "
            f"({_gib(max(peaks))}) | {_median(peaks) / mine[0]['param_bytes']:.2f} "
            f"({max(peaks) / mine[0]['param_bytes']:.2f}) | {_median([r['seconds'] for r in mine]):.1f} s | "
            + (f"{_median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | " if ratios
               else "- | ") +
            f"{_gib(mine[0]['variables_bytes'])} |")
    return "\n".join(lines) + "\n"


# --- the large model: save from loading functions, load without JAX, verify, inspect ---

_LOAD_NO_JAX = """
import sys
sys.modules["jax"] = sys.modules["jaxlib"] = None  # importing JAX now fails
import numpy as np, tensorflow as tf
from benchmarks.save_memory import reset_peak, peak_rss
import json, time
before = reset_peak(); start = time.perf_counter()
loaded = tf.saved_model.load(sys.argv[1])
y = loaded.signatures["serving_default"](x=tf.ones((3, int(sys.argv[2]))))["y"].numpy()
print(json.dumps({"seconds": time.perf_counter() - start, "before": before,
                  "peak_above": peak_rss() - before, "y00": float(y[0, 0])}))
"""

_TF_IMPORT = """
import resource, sys
sys.modules["jax"] = None
import tensorflow as tf
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def big_child(layers: int, width: int, out: str, step: str) -> dict:
    import numpy as np
    if step == "save":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import saved_model_tools
        import saved_model_tools.write.saved_model  # noqa: F401  (TF and JAX: imported before "before")
        # Each layer is made (as a checkpoint reader would read it) when its Variable is.
        params = [{"w": (lambda i=i: _layer(i, width, np.float32))} for i in range(layers)]
        x = np.ones((2, width), np.float32)
        before = reset_peak()
        start = time.perf_counter()
        saved_model_tools.save(out, _apply, params, [x], polymorphic_shapes=[f"(b, {width})"],
                               input_names=["x"], output_names=["y"],
                               progress=lambda line: print(line, file=sys.stderr, flush=True))
    elif step == "verify":
        import resource
        import saved_model_tools
        before = 0
        start = time.perf_counter()
        result = saved_model_tools.verify.verify(out, timeout=1800)
        if not result.ok:
            raise RuntimeError(result.format())
        return {"seconds": time.perf_counter() - start,
                "child_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    elif step == "inspect":
        import saved_model_tools
        import saved_model_tools.inspect  # noqa: F401  (TF: imported before "before")
        before = reset_peak()
        start = time.perf_counter()
        info = saved_model_tools.inspect.inspect_saved_model(out)
        assert info.variable_bytes == layers * width * width * 4, info.variable_bytes
    return {"seconds": time.perf_counter() - start, "before": before,
            "peak_above": peak_rss() - before}


def measure_big(gib: float, width: int) -> str:
    layers = max(1, round(gib * 2**30 / (width * width * 4)))
    param_bytes = layers * width * width * 4
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = tempfile.mkdtemp(prefix="save_memory_big_") + "/model"
    steps = {}
    try:
        for step in ("save", "inspect", "verify"):
            steps[step] = _run_child(["--big-child", step, "--layers", str(layers),
                                      "--width", str(width), "--out", out])
            print(step, steps[step], flush=True)
        proc = subprocess.run([sys.executable, "-c", _LOAD_NO_JAX, out, str(width)], cwd=ROOT,
                              env=env, capture_output=True, text=True, check=True)
        steps["load"] = json.loads(proc.stdout.splitlines()[-1])
        proc = subprocess.run([sys.executable, "-c", _TF_IMPORT], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True)
        tf_import = int(proc.stdout.split()[-1])
    finally:
        subprocess.run(["rm", "-rf", str(Path(out).parent)], check=True)
    x = lambda n: f"{n / param_bytes:.2f}x"
    verify_above = steps["verify"]["child_peak"] - tf_import
    return "\n".join([
        f"# A {_gib(param_bytes)} model: save, load without JAX, verify, inspect", "",
        f"`python -m benchmarks.save_memory --big-gib {gib:g}`: {layers} dense layers "
        f"{width} wide, float32, {_gib(param_bytes)} of parameters, on a {_gib(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'))} "
        f"machine shared with other work. Each step in a fresh process; memory: its peak RSS "
        f"minus its RSS before the step.", "",
        "| step | time | peak above before | x params |", "|---|---:|---:|---:|",
        f"| `save` from per-layer loading functions (the parameters exist only as Variables) | "
        f"{steps['save']['seconds']:.1f} s | {_gib(steps['save']['peak_above'])} | "
        f"{x(steps['save']['peak_above'])} |",
        f"| `tf.saved_model.load` + one call, JAX blocked | {steps['load']['seconds']:.1f} s | "
        f"{_gib(steps['load']['peak_above'])} | {x(steps['load']['peak_above'])} |",
        f"| `verify` (its JAX-free child: TF1 session load, then TF2 load; references, warmup; "
        f"peak {_gib(steps['verify']['child_peak'])} minus TF's import {_gib(tf_import)}) | "
        f"{steps['verify']['seconds']:.1f} s | {_gib(verify_above)} | {x(verify_above)} |",
        f"| `inspect` | {steps['inspect']['seconds']:.1f} s | "
        f"{_gib(steps['inspect']['peak_above'])} | {x(steps['inspect']['peak_above'])} |",
        ""])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--writers", default=",".join(WRITERS))
    parser.add_argument("--big-gib", type=float, default=None)
    parser.add_argument("--name", default="save_memory",
                        help="results/NAME.md and .json (e.g. for a run of some writers)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--big-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.layers, args.width, args.out)))
    elif args.big_child:
        print(json.dumps(big_child(args.layers, args.width, args.out, args.big_child)))
    elif args.big_gib:
        text = measure_big(args.big_gib, args.width)
        (RESULTS / "save_memory_big.md").write_text(text)
        print(text)
    else:
        writers = args.writers.split(",")
        unknown = set(writers) - set(WRITERS)
        if unknown:
            parser.error(f"unknown writers {sorted(unknown)}; known: {list(WRITERS)}")
        rows = measure(args.rounds, args.layers, args.width, writers)
        text = report(rows, args.rounds, args.layers, args.width)
        (RESULTS / f"{args.name}.json").write_text(json.dumps(rows, indent=1))
        (RESULTS / f"{args.name}.md").write_text(text)
        print(text)


if __name__ == "__main__":
    main()
