"""Pretrained image backbones for the PyTorch room, one module per network, each loading the
weights a pip package ships (the jobs have no internet)."""
