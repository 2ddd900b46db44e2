"""Tests of pipeline/local/jobs/v3/."""
