# Two commands on a fresh machine: `make run` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
PORT ?= 8000
KEEP ?=

.PHONY: run test up install lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch first, pinned, so nothing pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)  ## the main job end to end on the embedded default (SQLite, embedded broker, local checkpoints); KEEP=1: then keep the service up
	$(VENV)/bin/veernet demo --port $(PORT) $(if $(KEEP),--keep)

up: $(STAMP)  ## the same processes against the stack named by DATABASE_URL, BROKER_URL, CHECKPOINT_URL, ...
	$(VENV)/bin/veernet up --port $(PORT)

test: $(STAMP)  ## install, start the services the tests need if they are down, run every test
	./scripts/ensure-services
	$(VENV)/bin/pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy api worker veernet_core

bench: $(STAMP)
	for script in bench/*.py; do $(PY) $$script; done

clean:
	rm -rf var .pytest_cache
