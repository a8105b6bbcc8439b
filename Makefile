# Traitdeck: `make demo` runs the product, `make test` runs every check. Both work on a fresh clone.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
DOMAIN_TESTS := tests/policy/domain tests/observe/domain
NOT_DJANGO := --ignore=tests/e2e $(foreach d,$(DOMAIN_TESTS),--ignore=$(d))

.PHONY: help venv demo test lint test-unit test-django test-async test-browser system-deps bench clean

help:
	@echo "make demo   - install, migrate, load the sample policy, serve http://$(HOST):$(PORT)/ and run the simulator"
	@echo "make test   - lint, then the unit, django, async and browser test groups"
	@echo "make bench  - measure speed targets"

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || { PYBIN=$$(scripts/find-python) && echo "creating $(VENV) with $$PYBIN" && "$$PYBIN" -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

demo: venv
	@HOST=$(HOST) PORT=$(PORT) exec scripts/demo

system-deps:
	@scripts/ensure-system-deps

test: venv system-deps
	@scripts/run-tests

lint: venv
	@mkdir -p .test-artifacts
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy policy/domain observe/domain
	$(VENV)/bin/mypy config accounts policy observe --exclude '/domain/'
	@echo "lint: ruff and mypy clean" > .test-artifacts/summary-0-lint.txt

test-unit: venv
	@scripts/test-group unit -p no:django -W ignore::pytest.PytestConfigWarning $(DOMAIN_TESTS)

test-django: venv
	@scripts/test-group django tests $(NOT_DJANGO) -m "not asyncio"

test-async: venv
	@scripts/test-group async tests $(NOT_DJANGO) -m asyncio

test-browser: venv system-deps
	@DJANGO_ALLOW_ASYNC_UNSAFE=true scripts/test-group browser -p no:django -W ignore::pytest.PytestConfigWarning tests/e2e

bench: venv
	@echo "=== policy: load, validate, export ===" && $(PY) tests/bench/bench_policy.py
	@echo "=== observe: ingest throughput (SQLite file) ===" && $(PY) tests/bench/bench_ingest.py

clean:
	rm -rf $(VENV) .test-artifacts .mypy_cache .ruff_cache .hypothesis
