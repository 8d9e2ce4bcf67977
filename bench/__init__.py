"""Benchmarks against peers, each run from the project root as `python -m bench.NAME`; the
harness they share: bench/common.py."""
