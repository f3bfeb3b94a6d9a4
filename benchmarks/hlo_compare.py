"""Whether ours and the peer make XLA run the same program (the jit_compile forward rows).

For each forward workload, the `tf.function(..., jit_compile=True)` of ours (default options)
and of the peer are called once in a child process with `XLA_FLAGS=--xla_dump_to=...`; the
optimized HLO XLA runs (`*cpu_after_optimizations.txt` of the cluster) is compared after
removing names, metadata and ids. Identical programs mean any timing difference between the
two rows is the machine's noise, not the conversion. Run:
`python -m benchmarks.hlo_compare`; writes results/hlo_compare.md.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import harness

_CHILD = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
from jax.experimental import jax2tf
import jax2tf_native
from benchmarks import forward
model, batch, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
make_params, apply_fn, make_input = forward.MODELS[model]
variables = {k: tf.Variable(v) for k, v in make_params().items()}
convert = jax2tf.convert if which == "peer" else jax2tf_native.convert
fn = forward._tf_forward(convert(apply_fn), variables, jit_compile=True)
fn(tf.constant(make_input(batch))).numpy()
"""


def _normalized(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if line.startswith("HloModule") or line.startswith("//"):
            continue
        line = re.sub(r", metadata=\{[^}]*\}", "", line)
        line = re.sub(r"\b(a_inference|ENTRY %a_inference)[\w.]*", "NAME", line)
        line = re.sub(r"_[0-9]+__", "__", line)
        lines.append(line)
    return lines


def optimized_hlo(model: str, batch: int, which: str, workdir: str) -> list[str]:
    dump = Path(workdir) / f"{model}_{batch}_{which}"
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text")
    subprocess.run([sys.executable, "-c", _CHILD, model, str(batch), which], check=True,
                   env=env, capture_output=True)
    files = sorted(p for p in dump.glob("*cpu_after_optimizations.txt"))
    return [line for f in files for line in _normalized(f.read_text())]


def main() -> None:
    from benchmarks import forward
    lines = ["# The XLA program of ours vs the peer (forward, `jit_compile=True`)", "",
             "`python -m benchmarks.hlo_compare`: the optimized HLO XLA runs for each "
             "candidate's cluster, names, metadata and ids removed.", "",
             "| workload | ours lines | peer lines | identical |", "|---|---:|---:|---|"]
    with tempfile.TemporaryDirectory() as workdir:
        for model, batch in forward.WORKLOADS:
            ours = optimized_hlo(model, batch, "ours", workdir)
            peer = optimized_hlo(model, batch, "peer", workdir)
            lines.append(f"| {model} b{batch} | {len(ours)} | {len(peer)} | "
                         f"{'yes' if ours == peer else 'no'} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    (harness.RESULTS_DIR / "hlo_compare.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
