"""Tests of pipeline/local/jobs/tuning/."""
