"""Frozen back-compat artifacts: JAX exports whose bytes must keep running in TF and in JAX.

- `artifacts`: what we freeze (one spec per custom-call target / program kind).
- `generate`: exports the specs and writes them; `python -m tools.backcompat generate`.
- `storage`: the on-disk layout under tests/backcompat/data, and loading.
"""
