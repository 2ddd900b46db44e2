"""Tests of serving/: the model, the codec, the HTTP server and offline predictions."""
