"""The handler of `jax2tf-native demo`: the example model's JAX vs TF comparison, and with
--out a trained SavedModel verified without JAX. The demo itself is on the writing side
(saved_model_tools/demo/), reached through the package's lazy attribute."""
from __future__ import annotations

import argparse

import saved_model_tools
from saved_model_tools.cli.failures import fail


def run_demo(args: argparse.Namespace) -> int:
    demo = saved_model_tools.demo
    agree = demo.jax_vs_tf.run(batch_sizes=args.batch_sizes, repeats=args.repeats)
    if args.out is None:
        return 0 if agree else 1
    print()
    try:
        verified = demo.saved_model.run(args.out)
    except FileExistsError as e:
        return fail(args, str(e), 2)
    return 0 if agree and verified else 1
