"""Errors that are the user's to fix: the CLI prints them as one line, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or a missing setting; the message names the thing and the fix."""
