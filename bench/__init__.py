"""Benchmarks against peers, each run from the project root as `python -m bench.NAME`; the
harness they share: bench/harness.py (its entry point `run`, the figures' JSON lines)."""
