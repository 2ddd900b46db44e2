"""Fixtures: a moto server per session, a fresh account per test, the infra stack in it."""

from tests.moto_aws import aws, moto_url, stack  # noqa: F401
