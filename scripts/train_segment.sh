#!/usr/bin/env bash
# One time-boxed segment of a long CPU training run, such as puicl-v1's (docs/model_card/v1.md,
# "Reproduce"), that a later session continues bit for bit from what this one commits.
#
#   scripts/train_segment.sh CONFIG NAME MINUTES
#   scripts/train_segment.sh configs/puicl_v1.yaml puicl-v1 150
#
# 1. if runs/NAME/run is absent, seeds it from the committed resumable state in
#    checkpoints/NAME-run (the newest checkpoint, its index, config and metrics);
# 2. writes to runs/NAME/shards the steps this segment can reach (scripts/segment.py plan;
#    STEPS_PER_MINUTE overrides the run's last logged speed), with the validation split when
#    the config validates during training (prior-gen keeps the shards that verify);
# 3. trains for at most MINUTES with torchrun: 2 processes x 1 thread, the run's hardware class
#    together with the CPU (docs/training.md: a run continues bit for bit on the same CPU
#    features, world size and threads);
# 4. copies the resumable state to checkpoints/NAME-run for the next session to commit
#    (scripts/segment.py save), exports the weights to runs/NAME/weights_step<N> and scores
#    them on both yardsticks of docs/recipe.md (the fixed validation split and the
#    20-dataset dev subset) into runs/recipe/NAME_step<N>/reference.json, and appends those
#    scores to checkpoints/NAME-run/scores.jsonl (scripts/segment.py record), the run's curve
#    (studies/plot_run_curve.py).
set -euo pipefail
if [[ $# -ne 3 ]]; then
    echo "usage: $0 CONFIG NAME MINUTES" >&2
    exit 2
fi
CONFIG=$1 NAME=$2 MINUTES=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=.venv/bin/python
SHARDS=runs/$NAME/shards RUN=runs/$NAME/run SAVED=checkpoints/$NAME-run
[[ -f $CONFIG ]] || { echo "error: no config at $CONFIG" >&2; exit 2; }
[[ $MINUTES =~ ^[0-9]+$ && $MINUTES -ge 1 ]] || {
    echo "error: MINUTES must be a whole number >= 1, got '$MINUTES'" >&2; exit 2; }

if [[ ! -d $RUN && -d $SAVED ]]; then
    mkdir -p "$RUN/checkpoints"
    cp "$SAVED"/config.yaml "$SAVED"/metrics.jsonl "$RUN"/
    cp "$SAVED"/checkpoints/* "$RUN/checkpoints/"
    echo "resuming from the committed state in $SAVED"
fi

# Only the shards this segment can read (scripts/segment.py plan): a run of hours has GBs.
PLAN_TEXT=$($PY scripts/segment.py plan "$CONFIG" "$RUN" "$SHARDS" "$MINUTES")
mapfile -t PLAN <<< "$PLAN_TEXT"
UNTIL=${PLAN[0]}
for COMMAND in "${PLAN[@]:1}"; do
    eval ".venv/bin/$COMMAND --workers 2"
done

OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc_per_node 2 trainer/main.py \
    --config "$CONFIG" --shards "$SHARDS" --run-dir "$RUN" --threads 1 \
    --until-step "$UNTIL" --time-limit "$MINUTES"

STEP=$($PY scripts/segment.py save "$RUN" "$SAVED")
WEIGHTS=runs/$NAME/weights_step$STEP
.venv/bin/trainer export "$RUN" --out "$WEIGHTS"
$PY -m studies.recipe_sweep --reference "${NAME}_step$STEP=$WEIGHTS"
$PY scripts/segment.py record "$SAVED" "runs/recipe/${NAME}_step$STEP/reference.json"
echo "segment done at step $STEP: commit $SAVED; scores in runs/recipe/${NAME}_step$STEP"
