"""Tests of .github/workflows/pipeline.yml: what runs on pull requests and on main, and how it
reaches AWS (OIDC, never stored keys). actionlint itself runs in `make lint`; the last test
here runs it on a broken workflow to show it would catch one.

    .venv/bin/pytest tests/workflows -q
"""
