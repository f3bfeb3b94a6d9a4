"""How close a bfloat16 Flax ResNet lowered to plain TF ops
(`enable_xla=False`) comes to `jax.jit` on CPU, forward and gradients.

For each configuration and seed (tools/flax_resnet.py: the Flax imagenet
example's ResNet in inference mode, BatchNorm statistics and scales perturbed) this records
- forward: max |plain - jax.jit| and that over max |jax.jit| (bf16 logits);
- gradients of sum(logits**2) w.r.t. the float32 parameters: per parameter, max |plain -
  jax.jit(jax.grad)| over max |jax.jit(jax.grad)| (worst parameter), and the norm of all
  differences over the norm of the gradient;
- the same two numbers for JAX's own bfloat16 gradient against its float32 one (the size of
  bfloat16's own rounding noise), and for op-by-op JAX (`jax.grad` without jit) against
  `jax.jit` (XLA's folding of converts happens only under jit).

Usage:
    nice -n 10 python tools/plain_bf16_resnet.py --out tools/results/plain_bf16_resnet.md
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax2tf_native  # noqa: E402
from tools import flax_resnet  # noqa: E402

CONFIGS = {
    "ResNet18 (2,2,2,2), 64 filters, 32x32, batch 2": (
        dict(stage_sizes=(2, 2, 2, 2), num_filters=64, image=32), 3),
    "ResNet (1,1), 8 filters, 16x16, batch 2 (the CI test's)": (
        dict(stage_sizes=(1, 1), num_filters=8, image=16), 6),
}


def _leaves(tree):
    return [np.asarray(a, np.float64) for a in jax.tree.leaves(tree)]


def _worst_leaf(got, want):
    return max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))


def _global(got, want):
    norm = lambda xs: np.sqrt(sum(float(np.sum(a * a)) for a in xs))
    return norm([g - w for g, w in zip(got, want)]) / norm(want)


def measure(config: dict, seed: int) -> dict:
    apply, params, images = flax_resnet.example(seed=seed, **config)
    apply32, _, _ = flax_resnet.example(seed=seed, dtype=jnp.float32, **config)

    def loss(p, x, model=apply):
        return jnp.sum(model(p, x).astype(jnp.float32) ** 2)

    out = np.asarray(jax.jit(apply)(params, images), np.float32)
    plain_out = np.asarray(jax2tf_native.convert(apply, enable_xla=False)(params, images),
                           np.float32)
    want = _leaves(jax.jit(jax.grad(loss))(params, images))
    plain = _leaves(jax2tf_native.convert(jax.grad(loss), enable_xla=False)(params, images))
    f32 = _leaves(jax.jit(jax.grad(lambda p, x: loss(p, x, apply32)))(params, images))
    eager = _leaves(jax.grad(loss)(params, images))
    return {"fwd max abs": float(np.abs(plain_out - out).max()),
            "fwd / max": float(np.abs(plain_out - out).max() / np.abs(out).max()),
            "grad worst param": _worst_leaf(plain, want), "grad global": _global(plain, want),
            "bf16 vs f32 worst": _worst_leaf(want, f32), "bf16 vs f32 global": _global(want, f32),
            "op-by-op vs jit worst": _worst_leaf(eager, want)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = ["# bfloat16 Flax ResNet through plain TF ops vs jax.jit", "",
             f"jax {jax.__version__}, TF {__import__('tensorflow').__version__}, "
             f"{time.strftime('%Y-%m-%d')}; `python tools/plain_bf16_resnet.py`. Inference "
             "mode; loss sum(logits**2); per-parameter numbers are max|diff| over the "
             "parameter's max|jax.jit(jax.grad)|, global ones norm(diff) over norm(gradient).", ""]
    for name, (config, seeds) in CONFIGS.items():
        rows = [measure(config, seed) for seed in range(seeds)]
        keys = list(rows[0])
        lines += [f"## {name}", "", "| seed | " + " | ".join(keys) + " |",
                  "|---" * (len(keys) + 1) + "|"]
        for seed, row in enumerate(rows):
            lines.append(f"| {seed} | " + " | ".join(f"{row[k]:.3g}" for k in keys) + " |")
        lines.append("")
        print("\n".join(lines[-len(rows) - 4:]), flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
