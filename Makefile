# make run    install on first use, then run the whole pipeline locally on the default data
# make test   install on first use, then lint, check import contracts and run the test suite
# make bench  run the benchmarks and write BENCHMARKS.md
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Reinstall whenever what the environment is made from changes.
STAMP := $(VENV)/.trainpipe-installed

.PHONY: install run test lint unit bench lock clean

$(STAMP): pyproject.toml constraints.txt scripts/install.sh
	bash scripts/install.sh
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/trainpipe run --local

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

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

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
