"""Tests of SDK v3 definitions run locally."""
