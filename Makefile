# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SHARED_DATA ?= $(abspath ../shared/data)
export MARGINALIA_SHARED_DATA := $(SHARED_DATA)
# pytest workers: 2 cores on the reference machine
WORKERS ?= 2

.PHONY: install demo test test-fast lint bench bench-stein bench-sparse clean

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
	$(PY) benchmarks/simulate_throughput.py
	$(MAKE) bench-stein
	$(MAKE) bench-sparse
	$(PY) benchmarks/ddssp_residual_quick.py --epsilons 0.5 1 2 --target-weights 64 --ridge-factors 2 --out benchmarks/results/ddssp_residual_large_eps.json
	# the regression page's issue-9 targets (epsilon 0.05 and 0.1, 5 trials), then the page in full (many hours)
	OUT=benchmarks/results/regression-issue9/targets EPSILONS=0.05,0.1 LINEAR_METHODS=ols,adassp,dd-ssp \
	  LOGISTIC_METHODS=objpert,dd-ssp RESUME=1 benchmarks/results/regression/run.sh 5 16
	OUT=benchmarks/results/regression-issue9 RESUME=1 benchmarks/results/regression/run.sh 5 16
	$(PY) benchmarks/regression_compare.py --new benchmarks/results/regression-issue9/targets
	$(PY) benchmarks/regression_compare.py

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

## bench-sparse: the sparse protocols and DP-IHT through the service (docs/sparse-results.md; about 30 core-minutes)
M := $(VENV)/bin/marginalia bench
bench-sparse: install
	$(M) sparse --method ldp-iht,label-ldp-iht,lasso --p 100,400 --n 10000,20000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench.json --plot $(R)/sparse_bench.png --force
	$(M) sparse --eta 0.2 --method ldp-iht,label-ldp-iht --p 100,400 --n 10000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_paper_eta.json --plot $(R)/sparse_bench_paper_eta.png --force
	$(M) sparse --method bernstein,bernstein-1bit --p 1,2 --n 10000,40000,160000 --s 1 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_bernstein.json --plot $(R)/sparse_bench_bernstein.png --force
	$(M) sparse --method dr-erm --p 2000 --n 1000,4000 --s 10 --epsilon 1 --trials 3 --seed 0 \
	    --json $(R)/sparse_bench_drerm.json --plot $(R)/sparse_bench_drerm.png --force
	$(M) sparse --method ldp-iht --p 100 --n 100000 --s 10 --epsilon 1 --trials 1 --seed 0 \
	    --json $(R)/sparse_bench_speed.json --force
	OMP_NUM_THREADS=1 $(M) sparse --method dp-iht --p 100,400 --n 10000,20000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_dp_iht.json --plot $(R)/sparse_bench_dp_iht.png --force
	OMP_NUM_THREADS=1 $(M) dp-iht --train $(SHARED_DATA)/adult/adult_train.csv \
	    --domain $(SHARED_DATA)/adult/adult-domain.json --trials 5 --iterations 400 --seed 0 \
	    --out $(R)/dp_iht_sec72.json --plot $(R)/dp_iht_sec72.png --force
	OMP_NUM_THREADS=1 $(M) dp-iht --train $(SHARED_DATA)/adult/adult_train.csv \
	    --domain $(SHARED_DATA)/adult/adult-domain.json --trials 5 --iterations 400 --seed 1 \
	    --sweeps sparsity,epsilon --sweep-design adult-13 --out $(R)/dp_iht_sec72_p86.json --plot $(R)/dp_iht_sec72_p86.png --force

clean:
	rm -rf $(VENV) demo-output .pytest_cache
