"""Benchmarks of the input path: the Pipe reader (P2), shard writing (P4), image decoding and processing, typed tables."""
