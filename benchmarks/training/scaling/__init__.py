"""Scaling: how local distributed training and the runner scale (P1 ranks, P3 runner overhead, P6 per-host namespaces, growth with data size)."""
