"""Benchmarks of serving: the local server under load and Transform jobs."""
