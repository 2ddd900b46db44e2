"""How the training loop runs: callbacks, checkpoints, the learning-rate schedule, the allreduce, process setup and fault injection."""
