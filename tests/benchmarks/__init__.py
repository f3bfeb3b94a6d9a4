"""Tests of benchmarks/ (smoke runs and the result pages they write)."""
