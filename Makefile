# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SHARED_DATA ?= $(abspath ../shared/data)
export MARGINALIA_SHARED_DATA := $(SHARED_DATA)
# pytest workers: 2 cores on the reference machine
WORKERS ?= 2

.PHONY: install demo test test-fast lint bench bench-quick bench-stein bench-sparse clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[server,spark,test]'
	touch $@

## install: build .venv with the project (editable) and its pinned dependencies
install: $(VENV)/.installed

## demo: the main job on the embedded SQLite default (writes demo-output/)
demo: install
	$(PY) -m service.tools.demo

## test: lint, then every test (SQLite and a throwaway PostgreSQL), slow ones included
test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(WORKERS) --dist worksteal -p no:cacheprovider -q -rs

## test-fast: skip slow tests and PostgreSQL (local iteration only; CI runs `make test`)
test-fast: install
	MARGINALIA_TEST_POSTGRES=skip $(PY) -m pytest -n $(WORKERS) --dist worksteal -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check .

## bench: every benchmark (many hours; JSON and plots under benchmarks/results/, README there)
B := $(PY) -m benchmarks
R := benchmarks/results
bench: install bench-quick bench-stein bench-sparse
	$(B).counting
	$(B).objpert_memory --rows 1000000,5000000,20000000
	$(B).aim_profile --trials 2
	$(B).accuracy_forecast --tables adult --mechanisms mst aim --trials 5 --json $(R)/accuracy_forecast_graphical_adult.json
	$(B).accuracy_forecast --tables acs-income --mechanisms mst aim --trials 5 \
	    --json $(R)/accuracy_forecast_graphical_acs-income.json
	$(B).marginals
	# which marginal mechanism is best where, and auto's pick (docs/mechanisms.md; about 1.5 hours on 2 cores)
	$(B).mechanism_choice --trials 1 --json $(R)/mechanism_choice_a.json & \
	    $(B).mechanism_choice --first-trial 1 --trials 2 --json $(R)/mechanism_choice_b.json; wait
	$(B).mechanism_choice --mechanisms residual-floor --trials 2 --json $(R)/mechanism_choice_c.json
	$(B).mechanism_choice --merge $(R)/mechanism_choice_a.json $(R)/mechanism_choice_b.json $(R)/mechanism_choice_c.json
	# regression method auto's picks on the designs the DD-SSP paper does not use (docs/regression-results.md)
	$(B).regression_method_choice --json $(R)/regression_method_choice.json --force
	$(B).api_load
	$(B).console_pages
	$(B).body_edge
	$(B).load_memory --sizes 1000000,5000000,20000000 --postgresql
	$(B).dp_iht_engine --rows 1000000 --iterations 20 --repeats 3
	$(B).aim_profile --mechanisms aim --epsilons 1 --trials 2 --json $(R)/aim_profile_tolerance.json
	$(B).residual_quick --tables adult-train acs-income --one-way-weight 100 --threshold 2 --json $(R)/residual_levers.json
	$(B).residual_service
	$(B).residual_service --tables adult --mechanisms residual --trials 3 --json $(R)/residual_service_recheck.json
	$(B).ddssp_residual_quick
	$(B).ddssp_residual_quick --epsilons 0.5 1 2 --target-weights 64 --ridge-factors 2 \
	    --json $(R)/ddssp_residual_large_eps.json
	$(B).sparse_quick
	$(B).stein_glm_quick --reps 10
	$(B).local_glm --trials 10
	$(B).local_marginals --throughput 1000000 --batch 100000
	$(B).local_marginals --way 2 --aim-trials 0 --json $(R)/local_marginals_pairs.json
	# the regression page's issue-9 targets (epsilon 0.05 and 0.1, 5 trials), then the page in full (many hours)
	$(B).regression_suite 5 16 --out-dir $(R)/regression-issue9/targets --epsilons 0.05,0.1 \
	    --linear-methods ols,adassp,dd-ssp --logistic-methods objpert,dd-ssp --resume
	$(B).regression_suite 5 16 --out-dir $(R)/regression-issue9 --resume
	$(B).regression_compare --new $(R)/regression-issue9/targets
	$(B).regression_compare

## bench-quick: the quick benchmarks (a few minutes; each rewrites its results under benchmarks/results/)
bench-quick: install
	$(B).wire_throughput
	$(B).simulate_throughput
	$(B).fit_tolerance
	$(B).residual_quick --tables adult adult-train acs-income --trials 3
	$(B).accuracy_forecast --trials 3

## bench-stein: the Stein-GLM experiments through the service (docs/stein-glm-results.md; about 25 core-minutes)
bench-stein: install
	$(B).stein_glm --design gaussian --n 10000,30000,100000,290000 --epsilon 2,3,5,10 \
	    --trials 5 --seed 2021 --json $(R)/stein_glm_bench.json --plot $(R)/stein_glm_bench.png --force
	$(B).stein_glm_real --train $(SHARED_DATA)/acs/ACSemployment_train.csv \
	    --test $(SHARED_DATA)/acs/ACSemployment_test.csv --target ESR --epsilon 0.5,1,2,4,8 --trials 10 --seed 2021 \
	    --json $(R)/stein_glm_real_acs.json --plot $(R)/stein_glm_real_acs.png --force
	$(B).stein_glm_real --train $(SHARED_DATA)/adult/adult_train.csv \
	    --test $(SHARED_DATA)/adult/adult_test.csv --target 'income>50K' --epsilon 0.5,1,2,4,8 --trials 10 \
	    --seed 2021 --json $(R)/stein_glm_real_adult.json --plot $(R)/stein_glm_real_adult.png --force
	$(B).stein_glm_clipping --json $(R)/stein_glm_clipping.json --plot $(R)/stein_glm_clipping.png --force
	$(B).stein_glm --design gaussian --p 5,10,12,15 --n 30000,100000,290000 --epsilon 10 \
	    --trials 2 --seed 2021 --json $(R)/stein_glm_bench_p.json --plot $(R)/stein_glm_bench_p.png --force
	$(B).stein_glm --design bernoulli --public-n 20000,80000,160000 --n 100000,290000 \
	    --epsilon 10 --trials 2 --seed 2021 --json $(R)/stein_glm_bench_public_n.json \
	    --plot $(R)/stein_glm_bench_public_n.png --force
	$(B).stein_glm --design bernoulli --n 10000,30000,100000,290000 --epsilon 2,3,5,10 \
	    --trials 2 --seed 2021 --json $(R)/stein_glm_bench_bernoulli.json --plot $(R)/stein_glm_bench_bernoulli.png \
	    --force

## bench-sparse: the sparse protocols and DP-IHT through the service (docs/sparse-results.md; about 30 core-minutes)
bench-sparse: install
	$(B).sparse --iht-variant paper --method ldp-iht,label-ldp-iht,lasso --p 100,400 --n 10000,20000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench.json --plot $(R)/sparse_bench.png --force
	$(B).sparse --iht-variant paper --eta 0.2 --method ldp-iht,label-ldp-iht --p 100,400 --n 10000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_paper_eta.json --plot $(R)/sparse_bench_paper_eta.png --force
	$(B).sparse --method bernstein,bernstein-1bit --p 1,2 --n 10000,40000,160000 --s 1 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_bernstein.json --plot $(R)/sparse_bench_bernstein.png --force
	$(B).sparse --method bernstein,bernstein-1bit,linear-ssp --p 1,2 --n 10000,40000 --s 1 --epsilon 1 --trials 10 \
	    --seed 0 --json $(R)/sparse_bench_linear_ssp.json --plot $(R)/sparse_bench_linear_ssp.png --force
	$(B).sparse --method bernstein,bernstein-1bit --p 1,2 --n 160000 --s 1 --epsilon 1 --trials 10 \
	    --seed 0 --json $(R)/sparse_bench_bernstein_160k.json --plot $(R)/sparse_bench_bernstein_160k.png --force
	$(B).sparse --method linear-ssp --p 1,2,5 --n 10000,40000,160000 --s 1 --epsilon 1,4 --trials 10 \
	    --seed 0 --json $(R)/sparse_bench_linear_ssp_n.json --plot $(R)/sparse_bench_linear_ssp_n.png --force
	$(B).sparse --method dr-erm --p 2000 --n 1000,4000 --s 10 --epsilon 1 --trials 3 --seed 0 \
	    --json $(R)/sparse_bench_drerm.json --plot $(R)/sparse_bench_drerm.png --force
	$(B).sparse --iht-variant paper --method ldp-iht --p 100 --n 100000 --s 10 --epsilon 1 --trials 1 --seed 0 \
	    --json $(R)/sparse_bench_speed.json --force
	OMP_NUM_THREADS=1 $(B).sparse --method dp-iht --p 100,400 --n 10000,20000,40000 --s 10 --epsilon 1 --trials 3 \
	    --seed 0 --json $(R)/sparse_bench_dp_iht.json --plot $(R)/sparse_bench_dp_iht.png --force
	OMP_NUM_THREADS=1 $(B).dp_iht --train $(SHARED_DATA)/adult/adult_train.csv \
	    --domain $(SHARED_DATA)/adult/adult-domain.json --trials 5 --iterations 400 --seed 0 \
	    --json $(R)/dp_iht_sec72.json --plot $(R)/dp_iht_sec72.png --force
	OMP_NUM_THREADS=1 $(B).dp_iht --train $(SHARED_DATA)/adult/adult_train.csv \
	    --domain $(SHARED_DATA)/adult/adult-domain.json --trials 5 --iterations 400 --seed 1 \
	    --sweeps sparsity,epsilon --sweep-design adult-13 --json $(R)/dp_iht_sec72_p86.json \
	    --plot $(R)/dp_iht_sec72_p86.png --force

clean:
	rm -rf $(VENV) demo-output .pytest_cache
