#!/usr/bin/env bash
# What one machine with a CUDA GPU checks and measures, in one run of about 9 minutes:
#   1. the CUDA tests (the GPU backends, bf16 inference close to the CPU's);
#   2. the paper's model on the paper's prior: tasks/s, GPU memory and data wait over
#      60 steps of stage 1 (configs/paper.yaml, one forward pass a step, no validation);
#   3. the large-task fine-tuning pilot (configs/puicl_v11_ft_large.yaml): step time and the
#      large-size validation AUC every 100 steps, for what is left of SECONDS (default 540)
#      less a minute, then its EMA weights.
# Each part is boxed in time and logged on its own, so that one failing leaves the others.
#
#   speed/gpu_check.sh OUT_DIR [SECONDS]
#
# OUT_DIR receives log.txt, tests.txt, paper_metrics.jsonl and pilot.tar.gz (the pilot's
# metrics.jsonl, config.yaml and exported weights). Figures: docs/performance.md ("GPU") and
# docs/recipe.md ("Training on large tasks").
set -uo pipefail
OUT=${1:?usage: speed/gpu_check.sh OUT_DIR [SECONDS]}
DEADLINE=$((SECONDS + ${2:-540}))
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/puicl_gpu_check}
WORKERS=$(nproc)
DEVICE=${DEVICE:-cuda}  # cpu: a dry run of the script itself
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LOG=$OUT/log.txt

say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }

say "machine"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    $PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
    echo "cores $WORKERS"; grep -m1 "model name" /proc/cpuinfo
} >>"$LOG" 2>&1

say "CUDA tests"
timeout 100 $PY -m pytest -q -p no:cacheprovider tests/model/test_backends.py \
    tests/model/test_classifier_precision.py >"$OUT/tests.txt" 2>&1
say "CUDA tests exit $?: $(tail -n 1 "$OUT/tests.txt")"

say "shards: the paper's stage 1, steps 0-59; the pilot's stage and its validation split"
PAPER=$WORK/paper.yaml
cat >"$PAPER" <<EOF
extends: $PWD/configs/paper.yaml
training: {log_every: 10, checkpoint_every: 1000, micro_batch_cells: null}
validation: {every_steps: 0}
EOF
timeout 120 $PY -m prior_gen.cli --config "$PAPER" --stages 1 --steps 0-59 \
    --out "$WORK/paper_shards" --workers "$WORKERS" >>"$LOG" 2>&1
CONFIG=configs/puicl_v11_ft_large.yaml
timeout 150 $PY -m prior_gen.cli --config $CONFIG --stages 1 --out "$WORK/pilot_shards" \
    --workers "$WORKERS" >>"$LOG" 2>&1
timeout 60 $PY -m prior_gen.cli --config $CONFIG --split val --stages 1 --steps 0-1 \
    --out "$WORK/pilot_shards" --workers "$WORKERS" >>"$LOG" 2>&1
say "shards done"

say "the paper's model, 60 steps of 48 tasks"
timeout 120 $PY trainer/main.py --config "$PAPER" --shards "$WORK/paper_shards" \
    --run-dir "$WORK/paper_run" --device "$DEVICE" --until-step 60 >>"$LOG" 2>&1
say "paper run exit $?"
cp "$WORK/paper_run/metrics.jsonl" "$OUT/paper_metrics.jsonl" 2>/dev/null

LEFT=$((DEADLINE - SECONDS - 60))
PILOT_MINUTES=$(awk "BEGIN {print $LEFT / 60}")
say "the large-task pilot, $PILOT_MINUTES minutes"
timeout $((LEFT + 30)) $PY trainer/main.py --config $CONFIG \
    --shards "$WORK/pilot_shards" --run-dir "$WORK/pilot_run" --device "$DEVICE" \
    --time-limit "$PILOT_MINUTES" >>"$LOG" 2>&1
say "pilot exit $?"
timeout 60 $PY -m trainer.cli export "$WORK/pilot_run" --out "$WORK/pilot_run/weights" \
    >>"$LOG" 2>&1
tar -czf "$OUT/pilot.tar.gz" -C "$WORK/pilot_run" metrics.jsonl config.yaml weights 2>>"$LOG"
say "done"
