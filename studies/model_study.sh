#!/usr/bin/env bash
# The configuration study behind the bundled checkpoint (docs/model_card/v0.md): for each config
# under configs/study/, generate its shards, train it, export it and score it on the quick
# benchmark subset (10 datasets x 2 repetitions). Summaries: runs/study/<config>/{run,bench}.
#   bash studies/model_study.sh a_small_model_small_tasks b_small_model_paper_tasks ...
set -euo pipefail
cd "$(dirname "$0")/.."
B=.venv/bin
SUBSET=diabetes,heart,monk1,banknote,car,iranian_churn,rice,wdbc,spambase,wine_quality
for name in "$@"; do
  config=configs/study/$name.yaml
  out=runs/study/$name
  $B/prior-gen --config "$config" --stages all --out "$out/shards"
  $B/prior-gen --config "$config" --split val --stages 1,10,20,tail --steps 0-1 --out "$out/shards"
  $B/python trainer/main.py --config "$config" --shards "$out/shards" --run-dir "$out/run" --threads 2
  $B/trainer export "$out/run" --out "$out/weights"
  $B/trainer plot "$out/run" --out "docs/model_card/study_$name.png"
  $B/puicl-bench --methods puicl --weights "$out/weights" --datasets "$SUBSET" --repeats 2 \
      --jobs 1 --out "$out/bench" --no-progress
done
