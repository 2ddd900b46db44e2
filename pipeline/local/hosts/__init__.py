"""Simulated SageMaker hosts on one machine: namespaces, processes, MPI launches and the ranks' CPU settings."""
