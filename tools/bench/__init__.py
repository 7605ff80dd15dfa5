"""Benchmarks: `python -m tools.bench <name>`; each prints a table and can write JSON. Not tests."""
