"""Serving a trained model: SageMaker TensorFlow Serving container's HTTP contract, and offline predictions."""
