#!/usr/bin/env bash
# What one machine with a CUDA GPU checks and measures, in one run of under 8 minutes. Run it
# first whenever a GPU is at hand; every part is boxed in time and logged on its own, so that
# one failing leaves the others.
#   1. the CUDA tests (the GPU backends against the specification, the padded one included,
#      deterministic start-up, bf16 inference close to the CPU's, a row's bytes in any block);
#   2. bit for bit, the config's step (the paper's: the unit step, training.gradient_sum:
#      units): two identical runs of STEPS steps of the paper's config (stage 1, one forward
#      pass a unit, deterministic kernels and attention auto: the defaults), a run stopped at
#      STEPS/2 and resumed, and the same STEPS steps by two processes sharing the one GPU
#      (torchrun, gloo for the exchange), compared tensor by tensor: IDENTICAL or DIFFERENT;
#      their tasks/s and data wait;
#   3. each way to run a step side by side (speed.step_variants): tasks/s of the DDP step, the
#      unit step, the unit step in padded shapes, and those shapes replayed as CUDA graphs or
#      compiled, at stages 1, 50 and 100, each checked run to run (IDENTICAL or DIFFERENT);
#   4. tasks/s and the data-wait share, side by side, for each attention backend (auto's
#      bucketed_matmul, bucketed) with deterministic kernels on and off; two runs without the
#      deterministic mode's fills (training.deterministic_fill: false) compared with each
#      other and with the default;
#   5. the classifier (the model alone) on the device: rows/s of a pool, two fits compared
#      byte for byte, and the largest difference to the CPU's scores; whether a query row's
#      bytes depend on its place in the block (speed.row_invariance); then what a table costs,
#      the default against the model alone, up to 200,000 rows and at the paper's size, and
#      the portfolio's learners alone there on several thread counts (speed.portfolio_parts);
#   6. each kernel's milliseconds for the step's two attentions (speed.bench_attention);
#   7. a torch.profiler table of a few steps of the default and of bucketed;
#   8. the default under torch.compile, beside the same run uncompiled.
#
#   speed/gpu_check.sh OUT_DIR            # on the GPU machine, within BUDGET seconds (470)
#   DEVICE=cpu speed/gpu_check.sh OUT_DIR # a dry run of the script itself (the smoke config;
#                                         # tests/trainer/test_gpu_check.py runs it)
#
# The parts run in the order of what matters most (the verdicts, then the speeds, then the
# kernels' detail, torch.compile last), each boxed in its own time and in what is left of
# BUDGET (0: no limit), so that the whole check ends within the minutes a GPU machine is at
# hand: a part with under 10 s left is skipped and says so.
#
# OUT_DIR receives log.txt (everything, with the verdicts and tables), tests.txt and
# runs.tar.gz (every run's metrics.jsonl and config.yaml). Figures: docs/performance.md, "GPU".
set -uo pipefail
OUT=${1:?usage: speed/gpu_check.sh OUT_DIR}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/puicl_gpu_check}
WORKERS=$(nproc)
START=$SECONDS
if [ "$DEVICE" = cpu ]; then
    # the smoke config's stages have 4 steps: its first two stages
    BASE=${CONFIG:-configs/smoke.yaml} STEPS=${STEPS:-8} LOG_EVERY=2 COMPILE=0 PROFILED=2
    SHARD_STEPS=(--stages 1-2)
    # the smoke config's three stages, 4 steps each; compiling takes minutes on a CPU
    VARIANT_SHARDS=(--stages 3 --steps 0-3)
    VARIANTS=(--stages 1,2,3 --steps 4 --variants ddp,units,padded,graphs --seconds 30)
    CLASSIFIER=(--rows 1500 --labeled 300 --cpu-rows 600)
    COST=(--rows 1500 --features 5)
    TESTS=(tests/trainer/test_determinism.py)
    BUDGET=${BUDGET:-0}
    PAPER_SIZE=(--rows 700 --features 5)
    PARTS=(--features 5 --threads 1,2 --repeats 1)
else
    BASE=${CONFIG:-configs/paper.yaml} STEPS=${STEPS:-40} LOG_EVERY=5 COMPILE=1 PROFILED=4
    SHARD_STEPS=(--stages 1 --steps "0-$((STEPS - 1))")
    VARIANT_SHARDS=(--stages 50,100 --steps 0-9)
    VARIANTS=(--stages 1,50,100 --steps 10 --variants ddp,units,padded,graphs,compile
              --seconds 40 --budget 170)
    CLASSIFIER=(--rows 50000 --labeled 2000 --cpu-rows 3000)
    COST=(--rows 1000,20000,200000 --features 16)
    TESTS=(tests/model/test_backends.py tests/model/test_classifier_precision.py
           tests/model/test_query_rows.py tests/trainer/test_determinism.py
           tests/trainer/test_units.py::test_a_captured_shape_replays_the_eager_unit)
    BUDGET=${BUDGET:-470}
    PAPER_SIZE=(--rows 700 --features 10,50)
    PARTS=(--features 10 --threads 1,4,16 --repeats 5)
fi
HALF=$((STEPS / 2))
mkdir -p "$OUT" "$WORK"
rm -rf "$WORK/runs" "$WORK/configs"  # runs start afresh; the shards are kept and checked
mkdir -p "$WORK/runs" "$WORK/configs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: >"$LOG"

say() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - START))s] $*" | tee -a "$LOG"; }

# boxed SECONDS COMMAND...: COMMAND under timeout, its limit cut to what is left of BUDGET;
# skipped (exit 124) when under 10 s are left
boxed() {
    local limit=$1
    shift
    if [ "$BUDGET" -gt 0 ]; then
        local left=$((BUDGET - (SECONDS - START)))
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    if [ "$limit" -lt 10 ]; then
        # into the log alone: the caller's output may already go there
        echo "[$(date -u +%H:%M:%S) +$((SECONDS - START))s] skipped, out of time: ${*:1:4}" >>"$LOG"
        return 124
    fi
    timeout -k 10 "$limit" "$@"  # killed 10 s later if it ignores the stop (a compile)
}

# config NAME [KEY: VALUE, ...]: the base config, one forward pass a step, no validation
config() {
    local file=$WORK/configs/$1.yaml
    cat >"$file" <<EOF
extends: $PWD/$BASE
training: {log_every: $LOG_EVERY, checkpoint_every: 100000, micro_batch_cells: null${2:+, $2}}
validation: {every_steps: 0}
EOF
    echo "$file"
}

# train NAME CONFIG SECONDS [ARGS...]: a run of the trainer, boxed in time
train() {
    local name=$1 file=$2 seconds=$3
    shift 3
    boxed "$seconds" $PY trainer/main.py --config "$file" --shards "$WORK/shards" \
        --run-dir "$WORK/runs/$name" --device "$DEVICE" "$@" >>"$LOG" 2>&1
    say "run $name exit $?"
}

# train_two NAME CONFIG SECONDS [ARGS...]: the same run by two processes on this machine's
# device (torchrun; on one GPU both share it, and gloo carries the exchange, which NCCL
# cannot between two processes of one GPU)
train_two() {
    local name=$1 file=$2 seconds=$3 port
    shift 3
    port=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} boxed "$seconds" $PY -m torch.distributed.run \
        --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" trainer/main.py \
        --config "$file" --shards "$WORK/shards" --run-dir "$WORK/runs/$name" \
        --device "$DEVICE" --dist-backend gloo "$@" >>"$LOG" 2>&1
    say "run $name exit $?"
}

say "machine"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
        torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
    echo "cores $WORKERS"; grep -m1 "model name" /proc/cpuinfo
} >>"$LOG" 2>&1

say "tests: ${TESTS[*]}"
boxed 100 $PY -m pytest -q -p no:cacheprovider "${TESTS[@]}" >"$OUT/tests.txt" 2>&1
say "tests exit $?: $(tail -n 1 "$OUT/tests.txt")"

say "shards: $BASE, ${SHARD_STEPS[*]}; ${VARIANT_SHARDS[*]}"
boxed 100 $PY -m prior_gen.cli --config "$BASE" "${SHARD_STEPS[@]}" \
    --out "$WORK/shards" --workers "$WORKERS" >>"$LOG" 2>&1
say "shards exit $?"
boxed 100 $PY -m prior_gen.cli --config "$BASE" "${VARIANT_SHARDS[@]}" \
    --out "$WORK/shards" --workers "$WORKERS" >>"$LOG" 2>&1
say "shards of the other stages exit $?"

say "bit for bit: two runs of $STEPS steps, $HALF steps resumed to $STEPS, and two processes"
DEFAULT=$(config default)  # attention auto: bucketed_matmul on a GPU
train det_a "$DEFAULT" 120 --until-step "$STEPS"
train det_b "$DEFAULT" 120 --until-step "$STEPS"
train det_resumed "$DEFAULT" 80 --until-step "$HALF"
train det_resumed "$DEFAULT" 80 --until-step "$STEPS"
train_two two_processes "$DEFAULT" 120 --until-step "$STEPS"
$PY -m speed.training_runs compare "$WORK/runs/det_a" "$WORK/runs/det_b" \
    "$WORK/runs/det_resumed" "$WORK/runs/two_processes" 2>&1 | tee -a "$LOG"
$PY -m speed.training_runs speed "$WORK/runs/det_a" "$WORK/runs/two_processes" 2>&1 \
    | tee -a "$LOG"

say "each way to run a step, side by side: ${VARIANTS[*]}"
boxed 190 $PY -m speed.step_variants --config "$DEFAULT" --shards "$WORK/shards" \
    --device "$DEVICE" "${VARIANTS[@]}" 2>&1 | grep -v "Warning\|warn" | tee -a "$LOG"

say "tasks/s by attention backend, deterministic kernels on and off"
train matmul_nondet "$(config matmul_nondet "attention: bucketed_matmul, deterministic: false")" \
    150 --until-step "$STEPS"
train bucketed_det "$(config bucketed_det "attention: bucketed")" 150 --until-step "$STEPS"
train bucketed_nondet "$(config bucketed_nondet "attention: bucketed, deterministic: false")" \
    150 --until-step "$STEPS"
RUNS=(det_a matmul_nondet bucketed_det bucketed_nondet)
$PY -m speed.training_runs speed "${RUNS[@]/#/$WORK/runs/}" 2>&1 | tee -a "$LOG"
say "bit for bit without the deterministic mode's fills"
NOFILL=$(config nofill "deterministic_fill: false")
train nofill "$NOFILL" 150 --until-step "$STEPS"
train nofill_b "$NOFILL" 150 --until-step "$STEPS"
$PY -m speed.training_runs compare "$WORK/runs/nofill" "$WORK/runs/nofill_b" \
    "$WORK/runs/det_a" 2>&1 | tee -a "$LOG"
$PY -m speed.training_runs speed "$WORK/runs/det_a" "$WORK/runs/det_b" \
    "$WORK/runs/nofill" "$WORK/runs/nofill_b" 2>&1 | tee -a "$LOG"

say "the classifier on $DEVICE"
boxed 120 $PY -m speed.classifier_device --device "$DEVICE" "${CLASSIFIER[@]}" 2>&1 \
    | grep -v "Warning\|proba = " | tee -a "$LOG"

say "a query row's bytes wherever it sits in its block, on $DEVICE"
boxed 60 $PY -m speed.row_invariance --device "$DEVICE" 2>&1 | tee -a "$LOG"

say "what a table costs on $DEVICE: the default and the model alone"
boxed 150 $PY -m speed.cost_model --device "$DEVICE" "${COST[@]}" 2>&1 \
    | grep -v "Warning\|warn" | tee -a "$LOG"
say "the paper's size on $DEVICE: 200 labeled positives, a pool of 500 with 20 % negatives"
boxed 60 $PY -m speed.cost_model --device "$DEVICE" "${PAPER_SIZE[@]}" --labeled-share 0.2858 \
    --pool-negatives 0.2 2>&1 | grep -v "Warning\|warn" | tee -a "$LOG"
say "where the default's time goes at the paper's size: the learners on the host's threads"
boxed 60 $PY -m speed.portfolio_parts --device "$DEVICE" "${PARTS[@]}" 2>&1 \
    | grep -v "Warning\|warn" | tee -a "$LOG"

say "each attention kernel at the step's shapes"
boxed 120 $PY -m speed.bench_attention --config "$DEFAULT" --device "$DEVICE" --repeats 3 \
    2>&1 | tee -a "$LOG"

for backend in auto bucketed; do
    say "profile of $PROFILED steps, attention $backend"
    boxed 90 $PY -m speed.profile_step --config "$(config "profile_$backend" "attention: $backend")" \
        --shards "$WORK/shards" --run-dir "$WORK/runs/profile_$backend" --steps "$PROFILED" \
        --warmup 2 --rows 20 --device "$DEVICE" 2>&1 | grep -v "^step \|profiler_st" | tee -a "$LOG"
done

if [ "$COMPILE" = 1 ]; then  # last: its compilations can take what is left
    say "torch.compile"
    train compiled "$(config compiled "compile: true")" 150 --until-step "$STEPS"
    $PY -m speed.training_runs speed "$WORK/runs/det_a" "$WORK/runs/compiled" 2>&1 | tee -a "$LOG"
fi

tar -czf "$OUT/runs.tar.gz" -C "$WORK/runs" --exclude checkpoints . 2>>"$LOG"
say "done"
