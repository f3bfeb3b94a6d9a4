"""Differential fuzzer (issue 35): random JAX programs, compared on `jax.jit`, the
XlaCallModule path and the plain-TF-ops path under the exactness contract
(tf_ops/exactness.py, docs/exactness.md).

Modules: `values` (edge-heavy inputs), `catalog` and `ops_*` (the op generators and each op's
contract state), `generate` (programs), `program` (their source and reproducers' text),
`paths` (packing and running on each path), `check` (comparisons and measurements), `batch`,
`shrink`, `known` (classes being fixed), `reproducer`, `worker`, `runner`, `report`;
`python -m tools.lax_fuzz --help` for the command line.
"""
