"""Tests of pipeline/local/jobs/environments/."""
