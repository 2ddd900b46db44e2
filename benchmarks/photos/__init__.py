"""Benchmarks on photos: pretrained backbones fine-tuned through the CLI."""
