# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SHARED_DATA ?= $(abspath ../shared/data)
export MARGINALIA_SHARED_DATA := $(SHARED_DATA)
# pytest workers: 2 cores on the reference machine
WORKERS ?= 2

.PHONY: install demo test test-fast lint bench bench-stein clean

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
	$(PY) benchmarks/residual_service.py
	$(PY) benchmarks/fit_tolerance.py
	$(PY) benchmarks/ddssp_residual_quick.py
	$(PY) benchmarks/simulate_throughput.py
	$(MAKE) bench-stein
	benchmarks/results/regression/run.sh 5 16   # the regression page in full: many hours

## bench-stein: the Stein-GLM experiments through the service (docs/stein-glm-results.md; about 25 core-minutes)
R := benchmarks/results
bench-stein: install
	$(VENV)/bin/marginalia bench stein-glm --design gaussian --n 10000,30000,100000,290000 --epsilon 2,3,5,10 \
	    --trials 5 --seed 2021 --json $(R)/stein_glm_bench.json --plot $(R)/stein_glm_bench.png --force
	$(VENV)/bin/marginalia bench stein-glm-real --train $(SHARED_DATA)/acs/ACSemployment_train.csv \
	    --test $(SHARED_DATA)/acs/ACSemployment_test.csv --target ESR --epsilon 1,2,5,10,20 --trials 3 --seed 2021 \
	    --json $(R)/stein_glm_real.json --plot $(R)/stein_glm_real.png --force
	$(VENV)/bin/marginalia bench stein-glm --design gaussian --p 5,10,12,15 --n 30000,100000,290000 --epsilon 10 \
	    --trials 2 --seed 2021 --json $(R)/stein_glm_bench_p.json --plot $(R)/stein_glm_bench_p.png --force
	$(VENV)/bin/marginalia bench stein-glm --design bernoulli --public-n 20000,80000,160000 --n 100000,290000 \
	    --epsilon 10 --trials 2 --seed 2021 --json $(R)/stein_glm_bench_public_n.json \
	    --plot $(R)/stein_glm_bench_public_n.png --force
	$(VENV)/bin/marginalia bench stein-glm --design bernoulli --n 10000,30000,100000,290000 --epsilon 2,3,5,10 \
	    --trials 2 --seed 2021 --json $(R)/stein_glm_bench_bernoulli.json --plot $(R)/stein_glm_bench_bernoulli.png \
	    --force

clean:
	rm -rf $(VENV) demo-output .pytest_cache
