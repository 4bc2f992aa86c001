# Two commands on a fresh machine: `make run` and `make test`. Each installs what it needs, as `make bench` does.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
PORT ?= 8000
KEEP ?=
# The suite's processes: most tests wait on processes and services as much as they compute.
TEST_WORKERS ?= 2

.PHONY: run test up install loops lint bench constraints clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch first, pinned, so nothing pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	# The images' versions (constraints.txt), so the tests run what the images ship; the test tools float.
	$(PIP) install --quiet --constraint constraints.txt -e '.[test]'
	touch $(STAMP)

install: $(STAMP) loops
	./scripts/ensure-tesseract

# The column tracer's loops are compiled by numba into its cache beside the source (10-30 s, once per change
# to veernet_core/digitise/tracer_loop.py); with the cache current this only loads them (about a second).
loops: $(STAMP)
	$(PY) -c 'from veernet_core.digitise.tracer import compile_loops; compile_loops()'

run: $(STAMP) loops  ## the main job end to end on the embedded default (SQLite, embedded broker, local checkpoints); KEEP=1: then keep the service up
	$(VENV)/bin/veernet demo --port $(PORT) $(if $(KEEP),--keep)

up: $(STAMP)  ## the same processes against the stack named by DATABASE_URL, BROKER_URL, CHECKPOINT_URL, ...
	$(VENV)/bin/veernet up --port $(PORT)

test: $(STAMP) loops  ## install, start the services the tests need if they are down, run every test
	./scripts/ensure-tesseract
	./scripts/ensure-services postgres redis chromium
	# In TEST_WORKERS processes (pytest-xdist), a file's tests in one; then, alone and in one process, the
	# tests marked `serial` (pyproject.toml), collected from the files that mark them (the whole suite's
	# collection takes 20 s).
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not serial"
	$(VENV)/bin/pytest -q -m serial $$(grep -rlE 'pytest\.mark\.serial' tests --include='test_*.py')

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy api worker veernet_core

BENCHES := $(filter-out bench/benchio.py,$(wildcard bench/*.py))

bench: $(STAMP) loops  ## install what the benches need (wrk; Postgres and Redis started if down), run each; one JSON line each
	./scripts/ensure-services postgres redis wrk
	for script in $(BENCHES); do $(PY) $$script || exit 1; done

constraints:  ## pin every dependency the images install (constraints.txt), after a change to pyproject.toml
	./scripts/freeze-constraints

clean:
	rm -rf var .pytest_cache
