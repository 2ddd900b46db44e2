"""Benchmarks of the advisor: its predictions against measured runs (P5) and the allreduce probe it calibrates with."""
