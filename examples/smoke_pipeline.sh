#!/usr/bin/env bash
# The main job end to end on the smoke config, in a few minutes on 2 CPU cores:
# prior-gen (train + validation shards) -> trainer -> trainer export -> prediction on a real
# PU task with the freshly trained smoke model and with the bundled checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=${OUT:-runs/quickstart}

rm -rf "$OUT"
$BIN/prior-gen --config configs/smoke.yaml --stages all --out "$OUT/shards"
$BIN/prior-gen --config configs/smoke.yaml --split val --stages 1,3,tail --steps 0-1 \
    --out "$OUT/shards"
$BIN/prior-gen inspect "$OUT/shards"
$BIN/python trainer/main.py --config configs/smoke.yaml --shards "$OUT/shards" \
    --run-dir "$OUT/run"
$BIN/trainer export "$OUT/run" --out "$OUT/weights"
$BIN/trainer plot "$OUT/run"
# The smoke model is trained for 16 steps on tiny tasks: it checks that the parts connect, not
# that the method works. Its AUC on this task is no quality figure and may land far from 0.5
# on either side (0.31 on the 2-core development machine). The bundled model's result comes
# last: it is the one to judge.
echo "--- wiring check: the smoke model (16 training steps; its AUC is no quality figure) ---"
$BIN/python examples/quickstart.py --weights "$OUT/weights" --name "smoke model (wiring check)"
echo
echo "--- result: the bundled pretrained model ---"
$BIN/python examples/quickstart.py --name "bundled model"
