# `make run`: set up and start everything on the embedded default (SQLite + filesystem broker).
# `make test`: set up and run the whole suite (PostgreSQL, Redis, Celery worker, Chromium).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py
PORT ?= 8000
# Django 6 needs Python 3.12+: take the first interpreter that qualifies.
PYTHON ?= $(shell for p in python3.13 python3.12 python3 $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python3); do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo $$p; break; }; done)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/simia
TEST_BROKER_URL ?= redis://127.0.0.1:6379/14
# Test processes (pytest-xdist), one a core: worker N uses Redis database 14 + N and its share of the fixed ports
# (tests/support/parallel.py).
TEST_WORKERS ?= 2
# The trainer client's integration tests run verifiers and TRL in a venv of their own: verifiers needs openai<3
# (the app pins 3) and TRL needs torch, whose CPU wheel on this machine's find-links is built for CPython 3.11.
TRAINER_VENV := .venv-trainer
TRAINER_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.11*/bin/python3) $(shell command -v python3.11))

.PHONY: install trainer-venv run worker chromium fault-servers test lint bench clean

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 or newer is required"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	$(VENV)/bin/pip install --quiet -e ./clients/python
	touch $@

install: $(VENV)/.installed

$(TRAINER_VENV)/.installed: tests/trainer_client/requirements.txt clients/python/pyproject.toml
	@test -n "$(TRAINER_PYTHON)" || { echo "Python 3.11 is required for the trainer client's tests"; exit 1; }
	$(TRAINER_PYTHON) -m venv $(TRAINER_VENV)
	$(TRAINER_VENV)/bin/pip install --quiet -r tests/trainer_client/requirements.txt
	$(TRAINER_VENV)/bin/pip install --quiet --no-deps -e ./clients/python
	touch $@

trainer-venv: $(TRAINER_VENV)/.installed

run: install
	$(MANAGE) migrate --noinput --verbosity 0
	$(MANAGE) collectstatic --noinput --verbosity 0
	$(MANAGE) demo_data
	$(MANAGE) ensure_admin
	@echo "Simia Web on http://127.0.0.1:$(PORT)/  (Ctrl-C stops the web server and the worker)"
	@# Stop the worker once (a warm shutdown) and wait for it; the trap clears itself so it never re-fires.
	@$(VENV)/bin/celery -A simia_web worker --pool threads --concurrency 8 --loglevel WARNING & worker=$$!; \
	trap 'trap - INT TERM EXIT; kill -TERM $$worker 2>/dev/null; wait $$worker 2>/dev/null' INT TERM EXIT; \
	$(MANAGE) runserver --noreload 127.0.0.1:$(PORT)

worker: install
	$(VENV)/bin/celery -A simia_web worker --pool threads --concurrency 64 --loglevel INFO

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The fault suite (tests/faults) starts a PostgreSQL and a Redis of its own, to kill and restart them mid-job.
fault-servers:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v redis-server >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq postgresql redis-server >/dev/null; }

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test: install trainer-venv chromium fault-servers
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(VENV)/bin/pytest -p no:cacheprovider \
		-n $(TEST_WORKERS) --durations=25 $(PYTEST_ARGS)

# The reference in docs/ as a site in site/ (mkdocs.yml): --strict fails on a broken link or anchor. Part of `make test`.
.PHONY: docs
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: docs

bench: install
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \
		$(PY) bench/rollout_throughput.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) bench/env_step_overhead.py
	DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench $(PY) bench/export_throughput.py
	$(PY) bench/fault_healing.py

clean:
	rm -rf $(VENV) $(TRAINER_VENV) var
