#!/usr/bin/env bash
# The paper's regression protocol (paper 002, Sec. 4 / App. D) through `marginalia bench regression`.
# Usage: benchmarks/results/regression/run.sh [MARGINAL_TRIALS [ROUNDS_PER_ATTRIBUTE]]   (from the repository root)
# Writes <task>.json and <task>.png next to this script (or in $OUT). See docs/regression-results.md for what was run.
# Environment: OUT=dir (default: this script's directory); RESUME=1 skips every run whose JSON exists already (a
# crash or a kill loses only the run in progress); ONLY=regex runs only the runs whose name matches;
# EPSILONS=comma-list, LINEAR_METHODS=comma-list, LOGISTIC_METHODS=comma-list narrow the protocol (a narrowed run
# writes JSON that RESUME=1 would take as complete: give it its own OUT).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-benchmarks/results/regression}
mkdir -p "$OUT"
DATA=${MARGINALIA_SHARED_DATA:-../shared/data}
PY=${PY:-.venv/bin/python}
MT=${1:-1}              # trials for the AIM-based methods (dd-ssp, aim-synth); the others get all 5
RPA=${2:-4}             # AIM's planned rounds per attribute of the design (AIM's default is 16)
COMMON=(--epsilons "${EPSILONS:-0.05,0.1,0.5,1,2}" --delta 1e-5 --trials 5 --marginal-trials "$MT" --max-train 50000 --seed 0
        --quiet)
LINEAR=(--methods "${LINEAR_METHODS:-ols,adassp,adassp-paper,dd-ssp,aim-synth}")
LOGISTIC=(--methods "${LOGISTIC_METHODS:-logreg,objpert,dd-ssp,aim-synth}")

# nist_taxi has no test split: a deterministic 1,000-row one (pandas sample, random_state=0); the rest is train.
SPLIT=$(mktemp -d)
"$PY" - "$DATA/nist_taxi/nist-taxi.csv" "$SPLIT" <<'PYEOF'
import sys
import pandas as pd
frame = pd.read_csv(sys.argv[1])
test = frame.sample(n=1000, random_state=0)
test.to_csv(f"{sys.argv[2]}/test.csv", index=False)
frame.drop(index=test.index).to_csv(f"{sys.argv[2]}/train.csv", index=False)
PYEOF

bench() {  # name, number of attributes in the design, then the options
  local name=$1 attributes=$2; shift 2
  if [[ -n ${ONLY:-} && ! $name =~ $ONLY ]]; then return; fi
  if [[ -n ${RESUME:-} && -f $OUT/$name.json ]]; then echo "== $name: $OUT/$name.json exists, skipped"; return; fi
  echo "== $name ($(date +%T))"
  "$PY" -m service.cli bench regression "$@" "${COMMON[@]}" --aim-rounds $((RPA * attributes)) \
    --out "$OUT/$name.json" --plot "$OUT/$name.png" --force
}

ADULT=(--train "$DATA/adult/adult_train.csv" --test "$DATA/adult/adult_test.csv" --domain "$DATA/adult/adult-domain.json"
       --categorical "workclass,education,marital-status,occupation,relationship,race,sex,native-country,income>50K")
ADULT_FEATURES="age,workclass,fnlwgt,marital-status,occupation,relationship,race,sex,capital-gain,capital-loss"
ADULT_FEATURES="$ADULT_FEATURES,hours-per-week,native-country"
for icpt in no-intercept intercept; do
  bench "adult-linear-$icpt" 14 "${ADULT[@]}" --target education-num --task linear --"$icpt" "${LINEAR[@]}" \
    --features "$ADULT_FEATURES,income>50K"
  bench "adult-logistic-$icpt" 15 "${ADULT[@]}" --target "income>50K" --task logistic --"$icpt" "${LOGISTIC[@]}"
done
# education-num is a function of education, so with both a constant is in the span of the features and the
# intercept changes nothing above; without education the intercept matters (docs/regression-results.md).
for icpt in no-intercept intercept; do
  bench "adult-logistic-noeducation-$icpt" 14 "${ADULT[@]}" --target "income>50K" --task logistic --"$icpt" \
    "${LOGISTIC[@]}" --features "$ADULT_FEATURES,education-num"
done

ACS=$DATA/acs
bench acsincome-linear-no-intercept 9 --train "$ACS/ACSincome-LIN_train.csv" --test "$ACS/ACSincome-LIN_test.csv" \
  --domain "$ACS/ACSincome-LIN-domain.json" --categorical COW,MAR,RELP,SEX,RAC1P \
  --target PINCP --task linear --no-intercept "${LINEAR[@]}"
bench acsemployment-logistic-no-intercept 17 --train "$ACS/ACSemployment_train.csv" --test "$ACS/ACSemployment_test.csv" \
  --domain "$ACS/ACSemployment-domain.json" \
  --categorical MAR,RELP,DIS,ESP,CIT,MIG,MIL,ANC,NATIVITY,DEAR,DEYE,DREM,SEX,RAC1P,ESR \
  --target ESR --task logistic --no-intercept "${LOGISTIC[@]}"
MOBILITY=(--train "$ACS/ACSmobility_train.csv" --test "$ACS/ACSmobility_test.csv" --domain "$ACS/ACSmobility-domain.json"
          --categorical MAR,SEX,DIS,CIT,MIL,ANC,NATIVITY,RELP,DEAR,DEYE,DREM,RAC1P,GCL,COW,ESR,MIG)
bench acsmobility-linear-no-intercept 21 "${MOBILITY[@]}" --target AGEP --task linear --no-intercept "${LINEAR[@]}"
bench acsmobility-logistic-no-intercept 21 "${MOBILITY[@]}" --target MIG --task logistic --no-intercept "${LOGISTIC[@]}"
bench taxi-linear-no-intercept 10 --train "$SPLIT/train.csv" --test "$SPLIT/test.csv" \
  --domain "$DATA/nist_taxi/nist-taxi-domain.json" \
  --categorical shift,company_id,pickup_community_area,dropoff_community_area,payment_type \
  --target trip_total --task linear --no-intercept "${LINEAR[@]}"
rm -rf "$SPLIT"
echo "== done ($(date +%T))"
