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
	$(PY) benchmarks/aim_profile.py --mechanisms aim --epsilons 1 --trials 2 --out benchmarks/results/aim_profile_tolerance.json
	$(PY) benchmarks/residual_quick.py --tables adult adult-train acs-income --trials 3
	$(PY) benchmarks/residual_quick.py --tables adult-train acs-income --one-way-weight 100 --threshold 2 --out benchmarks/results/residual_levers.json
	$(PY) benchmarks/residual_service.py
	$(PY) benchmarks/fit_tolerance.py
	$(PY) benchmarks/ddssp_residual_quick.py
	$(PY) benchmarks/ddssp_residual_quick.py --epsilons 0.5 1 2 --target-weights 64 --ridge-factors 2 --out benchmarks/results/ddssp_residual_large_eps.json
	# the regression page's issue-9 targets (epsilon 0.05 and 0.1, 5 trials), then the page in full (many hours)
	OUT=benchmarks/results/regression-issue9/targets EPSILONS=0.05,0.1 LINEAR_METHODS=ols,adassp,dd-ssp \
	  LOGISTIC_METHODS=objpert,dd-ssp RESUME=1 benchmarks/results/regression/run.sh 5 16
	OUT=benchmarks/results/regression-issue9 RESUME=1 benchmarks/results/regression/run.sh 5 16
	$(PY) benchmarks/regression_compare.py --new benchmarks/results/regression-issue9/targets
	$(PY) benchmarks/regression_compare.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
