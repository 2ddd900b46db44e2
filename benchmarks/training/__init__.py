"""Benchmarks of training itself: local scaling (P1), the runner's overhead (P3), namespaces (P6), strategies, FLOPs and MFU, and the probes they launch."""
