"""Tests of tools/ (results committed by the long runs, checked against the docs)."""
