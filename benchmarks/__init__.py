"""Benchmarks measured side by side with JAX native and the peer jax2tf, in one process."""
