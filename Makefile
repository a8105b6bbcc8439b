# Traitdeck: `make demo` runs the product, `make test` runs every check. Both work on a fresh clone.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
DOMAIN_TESTS := tests/core tests/layout tests/engine tests/policy/domain tests/observe/domain tests/kdcube/domain tests/simulator
# Hypothesis over every door and schemathesis over the whole API: minutes, so a group of their own.
HARDENING_TESTS := tests/hardening/test_fuzz.py tests/hardening/test_schema.py
# test-scale also runs the hardening tests, on PostgreSQL (a NUL character was a 500 only there).
NOT_DJANGO_SCALE := --ignore=tests/e2e --ignore=tests/conformance --ignore=tests/scale --ignore=tests/container $(foreach d,$(DOMAIN_TESTS),--ignore=$(d))
NOT_DJANGO := $(NOT_DJANGO_SCALE) $(foreach f,$(HARDENING_TESTS),--ignore=$(f))
# The runtime's package root (…/app/ai-app/src/kdcube-ai-app of a kdcube/kdcube-ai-app checkout).
KDCUBE_SRC ?=
KVENV := .venv-kdcube
# TypeScript for the roster recorder (KDCube's widget code under node): KDCube's lockfile's version.
KDCUBE_TYPESCRIPT := 5.9.3

.PHONY: help venv demo test lint bench-scale test-unit test-conformance test-django test-async test-hardening test-scale test-container test-browser system-deps bench clean conformance

help:
	@echo "make demo   - install, migrate, load the sample policy, serve http://$(HOST):$(PORT)/ and run the simulator"
	@echo "make test   - lint, then the unit, conformance, django, async, hardening (fuzzing), scale (PostgreSQL + Redis), container (podman) and browser test groups"
	@echo "make bench  - measure speed targets"
	@echo "make bench-scale  - a month of a busy deployment on a throw-away PostgreSQL (~50 min)"
	@echo "make conformance KDCUBE_SRC=...  - re-record the runtime's answers, print the agreement table"

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
	$(VENV)/bin/lint-imports --no-cache  # the layer contract: .importlinter
	$(VENV)/bin/mypy core engine policy/domain policy/cli.py policy/cli_commands.py observe/domain kdcube/domain kdcube/bridge/domain simulator
	$(VENV)/bin/mypy web pages config accounts audit policy discovery kdcube observe --exclude '/domain/'
	@echo "lint: ruff, import-linter and mypy clean" > .test-artifacts/summary-0-lint.txt

test-unit: venv
	@scripts/test-group unit -p no:django -W ignore::pytest.PytestConfigWarning $(DOMAIN_TESTS)

test-conformance: venv
	@scripts/test-group conformance -p no:django -W ignore::pytest.PytestConfigWarning tests/conformance

# Re-record what the runtime answers (in a venv of its own: its dependencies stay out of ours),
# then print Traitdeck's agreement table. KDCUBE_COMMIT names the commit when KDCUBE_SRC is not
# a git checkout (e.g. a `git archive` extract).
conformance: venv
	@test -n "$(KDCUBE_SRC)" || { echo "make conformance needs KDCUBE_SRC=<runtime package root>" >&2; exit 2; }
	@test -x $(KVENV)/bin/python || { PYBIN=$$(scripts/find-python) && "$$PYBIN" -m venv $(KVENV); }
	$(KVENV)/bin/pip install --quiet -r conformance/requirements-kdcube.txt
	@scripts/ensure-system-deps redis node
	@test -f $(KVENV)/node/node_modules/typescript/package.json && grep -q '"version": "$(KDCUBE_TYPESCRIPT)"' $(KVENV)/node/node_modules/typescript/package.json \
		|| npm install --silent --no-audit --no-fund --prefix $(KVENV)/node typescript@$(KDCUBE_TYPESCRIPT)
	KDCUBE_SRC=$(KDCUBE_SRC) PYTHONPATH=$(CURDIR) $(KVENV)/bin/python -m conformance.record
	KDCUBE_SRC=$(KDCUBE_SRC) PYTHONPATH=$(CURDIR) $(KVENV)/bin/python -m conformance.kdcube_props
	KDCUBE_SRC=$(KDCUBE_SRC) $(PY) -m conformance.kdcube_compose
	$(PY) -m conformance.compare

test-django: venv
	@scripts/test-group django tests $(NOT_DJANGO) -m "not asyncio"

test-async: venv
	@scripts/test-group async tests $(NOT_DJANGO) -m asyncio

# Arbitrary input at every door (hypothesis, 200 examples each) and the OpenAPI schema (schemathesis).
test-hardening: venv
	@scripts/test-group hardening $(HARDENING_TESTS)

# The Django, API, hardening and consumer tests again on a throw-away PostgreSQL + redis-server, and two real
# daphne workers sharing both (scripts/test-scale starts and removes the servers).
test-scale: venv
	@scripts/ensure-system-deps scale
	@scripts/test-scale $(NOT_DJANGO_SCALE)

# The Containerfile's image built with podman (from a local Debian trixie base kept between runs:
# scripts/container-base) and its containers (migrate, web, bridge) run on a throw-away PostgreSQL
# and redis-server (started by scripts/test-scale). Skips outside CI where podman cannot run.
test-container: venv
	@scripts/ensure-system-deps container
	@SCALE_GROUPS=container scripts/test-scale

test-browser: venv
	@scripts/ensure-system-deps browser
	@DJANGO_ALLOW_ASYNC_UNSAFE=true scripts/test-group browser -p no:django -W ignore::pytest.PytestConfigWarning tests/e2e

# One table of every figure of the performance issue beside its baseline from the same run; with
# BENCH_JSON=FILE the figures are also written there (each bench merges its own keys).
bench: venv
	@out="$${BENCH_JSON:-$$(mktemp -t traitdeck-bench-XXXXXX.json)}"; \
	echo "=== policy: load, validate, export ===" && BENCH_JSON="$$out" $(PY) tests/bench/bench_policy.py && \
	echo "=== observe: ingest, live, pages; dry-run ===" && BENCH_JSON="$$out" $(PY) tests/bench/bench_observe.py && \
	echo "=== impact: replay recorded rounds under two policies ===" && BENCH_JSON="$$out" $(PY) tests/bench/bench_replay.py && \
	echo "=== discovery: a 5,000-tool MCP server listed and validated ===" && BENCH_JSON="$$out" $(PY) tests/bench/bench_discovery.py && \
	echo "=== worker memory: four oversized uploads ===" && BENCH_JSON="$$out" $(PY) tests/bench/bench_body_limit.py

# A month of a busy deployment on PostgreSQL (issue 39; not part of `make test`): a throw-away
# PostgreSQL, a store grown to each of SCALE_SIZES events (default 1M, 10M, 30M, 100M: ~50 min, ~45 GB) and every figure
# measured at each size beside the empty store's (docs/performance.md). BENCH_JSON=FILE as above.
bench-scale: venv
	@scripts/ensure-system-deps scale
	@SCALE_GROUPS=bench scripts/test-scale

clean:
	rm -rf $(VENV) .test-artifacts .mypy_cache .ruff_cache .hypothesis
