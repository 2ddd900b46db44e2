"""Tests of infra/template.yaml: its security properties read statically, and a deployment
into moto whose outputs the CLI reads. cfn-lint and checkov run in `make lint`.

    .venv/bin/pytest tests/infra -q
"""
