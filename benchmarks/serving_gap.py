"""Where the time goes when a loaded SavedModel serves the example CNN, vs `jax.jit` (issue 7.5).

Three SavedModels of the same CNN are served through `loaded.signatures["serving_default"]`:
  ours save(jit_compile=False) -- `saved_model_tools.save` before this investigation: the
                                signature as a tf.function without jit_compile.
  ours save()                  -- `save` as shipped now: the signature built with
                                `jit_compile=True` (the change this investigation measured).
  jax2tf recipe              -- the peer's documented recipe (tf.Module + Variables +
                                tf.function(jit_compile=True) + experimental_custom_gradients).

Three measurements:
  latency  -- interleaved rounds at batch 1 and 64: wall and process-CPU time per call, and the
              median of per-round ratios to jax.jit (paired, so slow drifts of a shared machine
              cancel out).
  profile  -- TF's / JAX's profiler (XSpace): per call, the wall time, the time XLA kernels
              run (union of each thunk's start-to-`end:` span) and the rest (runtime
              overhead: Python, TF's function runtime, dispatch), with the top kernels,
              which show how TF's and jaxlib's XLA compile the same StableHLO.
  configs  -- the latency measurement in child processes under thread / XLA settings
              (TF inter-op / intra-op threads, XLA_FLAGS).

Run: `python -m benchmarks.serving_gap [--rounds N] [--no-configs]`; writes
results/serving_gap.json and .md.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import harness  # noqa: E402

BATCHES = (1, 64)
VARIANTS = ("ours save(jit_compile=False)", "ours save()", "jax2tf recipe")
# Settings applied in a fresh child process (threads must be set before TF's runtime starts).
CONFIGS = {
    "default": {},
    "TF inter_op=1": {"inter_op": 1},
    "TF intra_op=1": {"intra_op": 1},
    "TF inter_op=1 intra_op=1": {"inter_op": 1, "intra_op": 1},
    "XLA_FLAGS multi_thread_eigen=false": {
        "env": {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}},
    "XLA_FLAGS ynn fusions (TF and JAX)": {"env": {"XLA_FLAGS": (
        "--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_DOT,"
        "LIBRARY_FUSION_TYPE_ELTWISE,LIBRARY_FUSION_TYPE_REDUCE")}},
}


def build_models(directory: Path) -> dict[str, str]:
    """Writes the three SavedModels of the example CNN; returns {variant: path}."""
    from benchmarks import serving
    make_params, apply_fn, make_input, poly = serving.MODELS["cnn"]
    params, example = make_params(), make_input(2)
    paths = {v: str(directory / f"model_{i}") for i, v in enumerate(VARIANTS)}
    serving.save_ours(paths["ours save(jit_compile=False)"], apply_fn, params, example, poly,
                      jit_compile=False)
    serving.save_ours(paths["ours save()"], apply_fn, params, example, poly)
    serving.save_peer_recipe(paths["jax2tf recipe"], apply_fn, params, example, poly)
    return paths


def _candidates(paths: dict[str, str], batch: int) -> dict:
    """{label: synchronized call} for jax.jit and each loaded signature, outputs checked."""
    import jax
    import numpy as np
    import tensorflow as tf

    from benchmarks import models
    params = jax.tree.map(jax.numpy.asarray, models.cnn_params())
    x = models.cnn_batch(batch)[0]
    jitted = jax.jit(models.cnn_apply)
    x_jax = jax.numpy.asarray(x)
    want = np.asarray(jitted(params, x_jax))
    x_tf = tf.constant(x)
    out = {"jax.jit": lambda: jitted(params, x_jax).block_until_ready()}
    for label, path in paths.items():
        signature = tf.saved_model.load(path).signatures["serving_default"]
        np.testing.assert_allclose(signature(x=x_tf)["y"].numpy(), want, rtol=1e-4,
                                   atol=1e-5, err_msg=label)
        out[label] = (lambda s: lambda: s(x=x_tf)["y"].numpy())(signature)
    return out


def paired_latency(candidates: dict, rounds: int, warmup: int = 5) -> dict:
    """Interleaved rounds; wall and process-CPU seconds per call, and per-round ratios to the
    first candidate (the baseline)."""
    clocks = harness.clocked_rounds(candidates, rounds, warmup=warmup, alternate=False)
    wall, cpu = clocks["wall"], clocks["cpu"]
    base = next(iter(candidates))
    return {label: {"wall_s": harness.spread(wall[label]), "cpu_s": harness.spread(cpu[label]),
                    "ratio_vs_jax": harness.spread([w / b for w, b in
                                                    zip(wall[label], wall[base])])}
            for label in candidates}


def _kernel_intervals(xspace) -> dict[str, list[tuple[float, float]]]:
    """{kernel: [(start, end) seconds]} from XLA thunk events: each kernel from its start to its
    `end: name` marker (asynchronous thunks finish on other threads)."""
    kernels = collections.defaultdict(list)
    for plane in xspace.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        starts, ends = collections.defaultdict(list), collections.defaultdict(list)
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                t = line.timestamp_ns * 1e-9 + event.offset_ps * 1e-12
                (ends[name[5:]] if name.startswith("end: ") else starts[name]).append(t)
        for name, end_times in ends.items():
            kernels[name] += [(a, b) for a, b in zip(sorted(starts.get(name, [])),
                                                     sorted(end_times)) if b >= a]
    return kernels


_PLUMBING_OPS = {"Placeholder", "Identity", "IdentityN", "NoOp", "Const", "_Arg", "_Retval",
                 "PartitionedCall", "StatefulPartitionedCall"}


def graph_ops(path: str) -> dict[str, int]:
    """{op type: count} in a loaded signature's graph and the functions it calls (plumbing
    left out): what TF's executor runs op by op on every call, unless jit_compile puts them
    in one XLA cluster."""
    import tensorflow as tf
    graph_def = tf.saved_model.load(path).signatures["serving_default"].graph.as_graph_def()
    library = {f.signature.name: f for f in graph_def.library.function}
    counts, pending, seen = collections.Counter(), list(graph_def.node), set()
    while pending:  # the nodes, and those of the functions they call (not gradient functions)
        node = pending.pop()
        if node.op not in _PLUMBING_OPS:
            counts[node.op] += 1
        for attr in node.attr.values():
            name = attr.func.name
            if name in library and name not in seen:
                seen.add(name)
                pending += list(library[name].node_def)
    return dict(sorted(counts.items()))


def _busy_time(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: kernels running in parallel count once."""
    total, current_end = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if start > current_end:
            total += end - start
            current_end = end
        elif end > current_end:
            total += end - current_end
            current_end = end
    return total


def profile(candidates: dict, calls: int = 30) -> dict:
    """Per candidate: wall per call under the profiler, XLA kernels, the rest, top kernels."""
    import jax
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    result = {}
    for label, fn in candidates.items():
        for _ in range(5):
            fn()
        logdir = tempfile.mkdtemp(prefix="serving_gap_profile_")
        start, stop = ((lambda: jax.profiler.start_trace(logdir), jax.profiler.stop_trace)
                       if label == "jax.jit" else
                       (lambda: tf.profiler.experimental.start(logdir),
                        tf.profiler.experimental.stop))
        start()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        wall = (time.perf_counter() - t) / calls
        stop()
        xspace = xplane_pb2.XSpace()
        xspace.ParseFromString(Path(glob.glob(f"{logdir}/**/*.xplane.pb",
                                              recursive=True)[0]).read_bytes())
        shutil.rmtree(logdir, ignore_errors=True)
        intervals = _kernel_intervals(xspace)
        executable = _busy_time([i for spans in intervals.values() for i in spans]) / calls
        per_kernel = {k: sum(b - a for a, b in spans) / calls for k, spans in intervals.items()}
        top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:6]
        result[label] = {"wall_s": wall, "kernels_s": executable, "overhead_s": wall - executable,
                         "top_kernels_s": dict(top)}
    return result


def _apply_config(config: dict) -> None:
    import tensorflow as tf
    if "inter_op" in config:
        tf.config.threading.set_inter_op_parallelism_threads(config["inter_op"])
    if "intra_op" in config:
        tf.config.threading.set_intra_op_parallelism_threads(config["intra_op"])


def _child(args) -> None:
    """Measures latency under one config; prints JSON on the last line."""
    _apply_config(json.loads(args.config))
    paths = json.loads(args.paths)
    out = {f"b{b}": paired_latency(_candidates(paths, b), args.rounds) for b in BATCHES}
    print(json.dumps(out))


def run_configs(paths: dict, rounds: int, configs: dict = CONFIGS) -> dict:
    """Each config in a fresh process (same SavedModels); {config: latency by batch}."""
    results = {}
    root = str(Path(__file__).resolve().parent.parent)
    for name, config in configs.items():
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        env.update(config.get("env", {}))
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.serving_gap", "--child",
             "--config", json.dumps({k: v for k, v in config.items() if k != "env"}),
             "--paths", json.dumps(paths), "--rounds", str(rounds)],
            env=env, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            results[name] = {"error": proc.stderr.strip().splitlines()[-1:]}
            continue
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def run(rounds: int = 200, config_rounds: int = 100, with_configs: bool = True) -> dict:
    """Builds the models, measures latency and profiles in-process, then the configs."""
    from benchmarks import harness
    directory = Path(tempfile.mkdtemp(prefix="serving_gap_"))
    try:
        paths = build_models(directory)
        latency, profiles = {}, {}
        for batch in BATCHES:
            candidates = _candidates(paths, batch)
            latency[f"b{batch}"] = paired_latency(candidates, rounds)
            profiles[f"b{batch}"] = profile(candidates)
        ops = {label: graph_ops(path) for label, path in paths.items()}
        configs = run_configs(paths, config_rounds) if with_configs else {}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {"environment": harness.environment(), "rounds": rounds,
            "config_rounds": config_rounds, "latency": latency, "profile": profiles,
            "graph_ops": ops, "configs": configs}


def markdown(result: dict) -> str:
    ms = lambda s: f"{s * 1e3:.3f}"
    env = result["environment"]
    lines = ["# Serving gap: loaded SavedModel of the example CNN vs jax.jit", "",
             f"jax {env['jax']}, tensorflow {env['tensorflow']}, {env['cpus']} CPUs; "
             f"{result['rounds']} interleaved rounds; ms per call; ratio = median of per-round "
             f"ratios to jax.jit.", "",
             "| batch | candidate | wall median (p10-p90) | CPU median "
             "| ratio vs jax.jit (p10-p90) |",
             "|---|---|---|---|---|"]
    for batch, by_label in result["latency"].items():
        for label, s in by_label.items():
            w, r = s["wall_s"], s["ratio_vs_jax"]
            lines.append(f"| {batch} | {label} | {ms(w['median'])} ({ms(w['p10'])}-"
                         f"{ms(w['p90'])}) | {ms(s['cpu_s']['median'])} | {r['median']:.2f} "
                         f"({r['p10']:.2f}-{r['p90']:.2f}) |")
    lines += ["", "## Profile (per call, under the profiler)", "",
              "Wall times are inflated by the profiler; the latency table above is the "
              "measurement, this one shows where the time goes.", "",
              "| batch | candidate | wall | XLA kernels | rest (runtime) | top kernels |",
              "|---|---|---|---|---|---|"]
    for batch, by_label in result["profile"].items():
        for label, p in by_label.items():
            top = ", ".join(f"{k} {ms(v)}" for k, v in list(p["top_kernels_s"].items())[:4])
            lines.append(f"| {batch} | {label} | {ms(p['wall_s'])} | {ms(p['kernels_s'])} | "
                         f"{ms(p['overhead_s'])} | {top} |")
    lines += ["", "## Ops in each signature's graph", "",
              "Run one by one by TF's executor on every call, unless the function is "
              "jit_compile'd (then they are one XLA cluster).", "",
              "| candidate | ops |", "|---|---|"]
    for label, ops in result["graph_ops"].items():
        lines.append(f"| {label} | {', '.join(f'{op} x{n}' for op, n in ops.items())} |")
    if result["configs"]:
        lines += ["", "## Thread and XLA settings (one child process each; median ratio vs "
                      "jax.jit in that process, wall median ms)", "",
                  "| setting | batch | " + " | ".join(VARIANTS) + " | jax.jit ms |",
                  "|---|---|" + "---|" * len(VARIANTS) + "---|"]
        for name, by_batch in result["configs"].items():
            if "error" in by_batch:
                lines.append(f"| {name} | - | error: {by_batch['error']} |")
                continue
            for batch, by_label in by_batch.items():
                cells = [f"{by_label[v]['ratio_vs_jax']['median']:.2f} "
                         f"({ms(by_label[v]['wall_s']['median'])})" for v in VARIANTS]
                lines.append(f"| {name} | {batch} | " + " | ".join(cells) +
                             f" | {ms(by_label['jax.jit']['wall_s']['median'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--config-rounds", type=int, default=100)
    parser.add_argument("--no-configs", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--paths", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    from benchmarks import harness
    result = run(args.rounds, args.config_rounds, not args.no_configs)
    text = markdown(result)
    harness.write_results("serving_gap", result, text)
    print(text)


if __name__ == "__main__":
    main()
