"""A paired check of served latency: ours `save()` vs the peer's recipe, MLP at batch 1.

Saves the benchmark MLP both ways (`benchmarks.serving.save_ours` / `save_peer_recipe`), loads
both, and times `signatures["serving_default"]` in 30 interleaved rounds of 100 calls each
(a tf.Tensor in, tensors out: no numpy conversion; `harness.interleaved`, the order changing
from round to round). Cited in benchmarks/README.md (issue 15).
Run: `python -m benchmarks.serving_paired`.
"""
from __future__ import annotations

import tempfile

import tensorflow as tf

from benchmarks import harness, models
from benchmarks.serving import save_ours, save_peer_recipe


def main(rounds: int = 30, calls: int = 100) -> None:
    params, x = models.mlp_params(), models.mlp_batch(1)[0]
    directory = tempfile.mkdtemp()
    save_ours(directory + "/ours", models.mlp_apply, params, x, "(b, 512)")
    save_peer_recipe(directory + "/peer", models.mlp_apply, params, x, "(b, 512)")
    served = {name: tf.saved_model.load(f"{directory}/{name}").signatures["serving_default"]
              for name in ("ours", "peer")}
    inputs = tf.constant(x)
    stats = harness.interleaved({name: (lambda fn=fn: fn(x=inputs)) for name, fn in
                                 served.items()}, rounds=rounds, calls_per_round=calls,
                                warmup=1)  # the warm-up call compiles
    medians = {name: s["median_s"] for name, s in stats.items()}
    for name, median in medians.items():
        print(f"{name}: {median * 1e6:.0f} us per call, {median / medians['peer']:.2f}x the peer")


if __name__ == "__main__":
    main()
