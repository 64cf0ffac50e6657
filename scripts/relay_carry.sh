#!/usr/bin/env bash
# What a lent GPU machine lacks for `scripts/relay_gpu.sh`, gathered once into .relay_carry/
# (ignored by git; the device call names it in `carry`): the wheels of the train extra's
# packages its image does not have, for its Python 3.12 on x86-64, and the development suite
# (../shared/devsuite, or DEVSUITE_DIR) as one archive. About 12 MB.
#
#   scripts/relay_carry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.relay_carry
EXCLUDE=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$EXCLUDE")"
grep -qxF "/$CARRY/" "$EXCLUDE" 2>/dev/null || echo "/$CARRY/" >>"$EXCLUDE"
rm -rf "$CARRY" && mkdir -p "$CARRY/whl"
# the versions this project's CI installs (pip list in its venv); their own needs (numpy,
# packaging, typing-extensions, pyyaml) are on the machine's image
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CARRY/whl" \
    zarr==3.1.6 numcodecs==0.16.6 google-crc32c==1.9.0 donfig==0.8.1.post1 \
    webdataset==1.0.2 braceexpand==0.1.7
DEVSUITE=${DEVSUITE_DIR:-../shared/devsuite}
tar -cJf "$CARRY/devsuite.tar.xz" -C "$DEVSUITE" .
du -sh "$CARRY"
