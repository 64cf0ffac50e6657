#!/usr/bin/env bash
# One time-boxed segment of a long CPU training run, such as puicl-v1's (docs/model_card.md,
# "Reproduce"), that a later session continues bit for bit from what this one commits.
#
#   scripts/train_segment.sh CONFIG NAME MINUTES
#   scripts/train_segment.sh configs/puicl_v1.yaml puicl-v1 150
#
# 1. writes the run's shards to runs/NAME/shards, with the validation split when the config
#    validates during training (prior-gen keeps the shards that verify, so this is quick
#    after the first time);
# 2. if runs/NAME/run is absent, seeds it from the committed resumable state in
#    checkpoints/NAME-run (the newest checkpoint, its index, config and metrics);
# 3. trains for at most MINUTES with torchrun: 2 processes x 1 thread, the run's hardware class
#    together with the CPU (docs/training.md: a run continues bit for bit on the same CPU
#    features, world size and threads);
# 4. exports the weights to runs/NAME/weights_step<N>, scores them on both yardsticks of
#    docs/recipe.md (the fixed validation split and the 20-dataset dev subset) into
#    runs/recipe/NAME_step<N>/reference.json, and copies the resumable state to
#    checkpoints/NAME-run for the next session to commit.
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

.venv/bin/prior-gen --config "$CONFIG" --stages all --workers 2 --out "$SHARDS"
# the trainer's own validation split, when the config validates during training
VAL=$($PY - "$CONFIG" <<'EOF'
import sys, yaml
section = yaml.safe_load(open(sys.argv[1])).get("validation") or {}
if section.get("every_steps", 0):
    stages = ",".join(str(s) for s in section["stages"])
    print(f"{stages} 0-{int(section['steps_per_stage']) - 1}")
EOF
)
if [[ -n $VAL ]]; then
    read -r VAL_STAGES VAL_STEPS <<< "$VAL"
    .venv/bin/prior-gen --config "$CONFIG" --split val --stages "$VAL_STAGES" \
        --steps "$VAL_STEPS" --workers 2 --out "$SHARDS"
fi

if [[ ! -d $RUN && -d $SAVED ]]; then
    mkdir -p "$RUN/checkpoints"
    cp "$SAVED"/config.yaml "$SAVED"/metrics.jsonl "$RUN"/
    cp "$SAVED"/checkpoints/* "$RUN/checkpoints/"
    echo "resuming from the committed state in $SAVED"
fi

OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc_per_node 2 trainer/main.py \
    --config "$CONFIG" --shards "$SHARDS" --run-dir "$RUN" --threads 1 \
    --time-limit "$MINUTES"

STEP=$($PY - "$RUN" <<'EOF'
import json, sys
print(json.load(open(f"{sys.argv[1]}/checkpoints/index.json"))["checkpoints"][-1]["step"])
EOF
)
WEIGHTS=runs/$NAME/weights_step$STEP
.venv/bin/trainer export "$RUN" --out "$WEIGHTS"
$PY benchmarks/recipe_sweep.py --reference "${NAME}_step$STEP=$WEIGHTS"

# The resumable state: the newest checkpoint alone, with an index that lists only it.
rm -rf "$SAVED.tmp"
mkdir -p "$SAVED.tmp/checkpoints"
cp "$RUN"/config.yaml "$RUN"/metrics.jsonl "$SAVED.tmp"/
$PY - "$RUN" "$SAVED.tmp" <<'EOF'
import json, shutil, sys
run, saved = sys.argv[1], sys.argv[2]
index = json.load(open(f"{run}/checkpoints/index.json"))
newest = index["checkpoints"][-1]
shutil.copy2(f"{run}/checkpoints/{newest['file']}", f"{saved}/checkpoints/{newest['file']}")
index["checkpoints"] = [newest]
with open(f"{saved}/checkpoints/index.json", "w") as out:
    json.dump(index, out, indent=1)
EOF
rm -rf "$SAVED"
mv "$SAVED.tmp" "$SAVED"
echo "segment done at step $STEP: commit $SAVED; scores in runs/recipe/${NAME}_step$STEP"
