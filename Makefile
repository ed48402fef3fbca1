# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SHARED_DATA ?= $(abspath ../shared/data)
export MARGINALIA_SHARED_DATA := $(SHARED_DATA)
# pytest workers: 2 cores on the reference machine
WORKERS ?= 2

.PHONY: install demo test test-fast lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[server,test]'
	touch $@

## install: build .venv with the project (editable) and its pinned dependencies
install: $(VENV)/.installed

## demo: the main job on the embedded SQLite default (writes demo-output/)
demo: install
	$(PY) -m service.tools.demo

## test: lint, then every test (SQLite and a throwaway PostgreSQL), slow ones included
test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(WORKERS) -p no:cacheprovider -q -rs

## test-fast: skip slow tests and PostgreSQL (local iteration only; CI runs `make test`)
test-fast: install
	MARGINALIA_TEST_POSTGRES=skip $(PY) -m pytest -n $(WORKERS) -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check .

## bench: the benchmarks (an hour or more; JSON and plots under benchmarks/results/)
bench: install
	$(PY) benchmarks/counting.py
	$(PY) benchmarks/aim_profile.py --trials 2
	$(PY) benchmarks/marginals.py
	$(PY) benchmarks/api_load.py
	benchmarks/results/regression/run.sh 1 4

clean:
	rm -rf $(VENV) demo-output .pytest_cache
