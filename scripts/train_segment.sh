#!/usr/bin/env bash
# One time-boxed segment of a long CPU training run, such as puicl-v1's (docs/model_card.md,
# "Reproduce"), that a later session continues bit for bit from what this one commits.
#
#   scripts/train_segment.sh CONFIG NAME MINUTES
#   scripts/train_segment.sh configs/puicl_v1.yaml puicl-v1 150
#
# 1. if runs/NAME/run is absent, seeds it from the committed resumable state in
#    checkpoints/NAME-run (the newest checkpoint, its index, config and metrics);
# 2. writes to runs/NAME/shards the shards this segment can reach (STEPS_PER_MINUTE, below),
#    with the validation split when the config validates during training (prior-gen keeps
#    the shards that verify);
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

if [[ ! -d $RUN && -d $SAVED ]]; then
    mkdir -p "$RUN/checkpoints"
    cp "$SAVED"/config.yaml "$SAVED"/metrics.jsonl "$RUN"/
    cp "$SAVED"/checkpoints/* "$RUN/checkpoints/"
    echo "resuming from the committed state in $SAVED"
fi

# Only the shards this segment can read: from the run's step to the step it could reach in
# MINUTES at STEPS_PER_MINUTE (default: the run's last logged speed, else 60), and the stages
# those steps fall in. A run of hours has GBs of shards, which take a while to write.
read -r UNTIL STAGES <<< "$($PY - "$CONFIG" "$RUN" "$MINUTES" "${STEPS_PER_MINUTE:-}" <<'EOF'
import json, math, sys, yaml
from pathlib import Path
config, run, minutes, speed = yaml.safe_load(open(sys.argv[1])), Path(sys.argv[2]), \
    float(sys.argv[3]), sys.argv[4]
curriculum = config["curriculum"]
per_stage, stages = curriculum["steps_per_stage"], curriculum["stages"]
total = per_stage * stages + curriculum["tail_steps"]
start, rates = 0, []
index = run / "checkpoints" / "index.json"
if index.exists():
    start = json.loads(index.read_text())["checkpoints"][-1]["step"]
if not speed and (run / "metrics.jsonl").exists():
    for line in (run / "metrics.jsonl").read_text().splitlines():
        rate = json.loads(line).get("tasks_per_s")
        if rate:
            rates.append(rate)
tasks_per_step = curriculum["global_batch"]
steps_per_minute = float(speed) if speed else (
    sum(rates[-20:]) / len(rates[-20:]) * 60 / tasks_per_step if rates else 60.0)
until = min(total, start + math.ceil(minutes * steps_per_minute * 1.2) + 1)
first, last = start // per_stage + 1, (until - 1) // per_stage + 1
names = [str(k) for k in range(first, min(last, stages) + 1)]
if last > stages:
    names.append("tail")
print(until, ",".join(names) or "tail")
EOF
)"
.venv/bin/prior-gen --config "$CONFIG" --stages "$STAGES" --workers 2 --out "$SHARDS"
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

OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc_per_node 2 trainer/main.py \
    --config "$CONFIG" --shards "$SHARDS" --run-dir "$RUN" --threads 1 \
    --until-step "$UNTIL" --time-limit "$MINUTES"

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
