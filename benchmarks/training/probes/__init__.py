"""Probes: what the machine itself does (matmul FLOP/s, allreduce and in-step collective costs), the denominators the training benchmarks divide by."""
