"""Tests of the jax2tf_native package (the JAX -> TF conversion), mirroring its modules."""
