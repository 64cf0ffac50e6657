#!/usr/bin/env bash
# One segment of a relayed training run on a lent GPU machine, as one command (docs/training.md,
# "The paper's run, in segments"):
#
#   bash scripts/relay_gpu.sh checkpoints/paper-run "$OUT"
#
# 1. installs the wheels carried in .relay_carry/whl (the train extra's packages the machine's
#    image lacks: scripts/relay_carry.sh fetches them) into /tmp/relay_site;
# 2. unpacks the development suite carried in .relay_carry/devsuite.tar.xz, for the scores;
# 3. runs `python -m relay segment FOLDER OUT` from the working tree (uninstalled), within
#    BUDGET seconds of its start (520: the segment ends under 9 minutes), everything it prints
#    also in OUT/log.txt. OUT/NAME then holds the run folder to take back
#    (`python -m relay take OUT/NAME FOLDER`): the record, the metrics and the packed state.
#
# DEVICE=cpu makes it a dry run on a CPU (tests/trainer/test_relay.py runs the relay itself);
# RELAY_ARGS adds options of `python -m relay segment` (e.g. "--until-step 2000").
set -uo pipefail
FOLDER=${1:?usage: scripts/relay_gpu.sh RUN_FOLDER OUT_DIR}
OUT=${2:?usage: scripts/relay_gpu.sh RUN_FOLDER OUT_DIR}
PY=${PYTHON:-python3}
CARRY=${CARRY:-.relay_carry}
mkdir -p "$OUT"
{
    if compgen -G "$CARRY/whl/*.whl" >/dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/relay_site "$CARRY"/whl/*.whl || exit 2
        export PYTHONPATH=/tmp/relay_site
    fi
    if [ -f "$CARRY/devsuite.tar.xz" ]; then
        mkdir -p /tmp/relay_devsuite && tar -xJf "$CARRY/devsuite.tar.xz" -C /tmp/relay_devsuite \
            && export PUICL_DEVSUITE_DIR=/tmp/relay_devsuite
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
    # the project from its working tree, before anything installed; cuBLAS's deterministic
    # workspace before any process makes a handle (the trainer sets it too, for its own)
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
        CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
    # shellcheck disable=SC2086  # RELAY_ARGS is a list of options
    $PY -m relay segment "$FOLDER" "$OUT" --budget "${BUDGET:-520}" --device "${DEVICE:-cuda}" \
        ${RELAY_ARGS:-}
} 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
