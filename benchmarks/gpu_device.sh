#!/usr/bin/env bash
# On a GPU machine that cannot reach the package index, from the repository root with the kit's
# bundles under .gpu-kit (`make gpu-kit` on a machine that can): install the kit and this project
# into the machine's own Python (the one with its CUDA PyTorch), run every GPU check into
# runs/gpu_checks, and copy its summary.md and gpu_checks.tar.gz to DEST.
#   bash benchmarks/gpu_device.sh DEST [benchmarks.gpu_checks options, e.g. --budget-s 540]
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:?give the folder that receives summary.md and gpu_checks.tar.gz}
shift
PYTHON=${PYTHON:-python3}
"$PYTHON" -m benchmarks.gpu_kit install .gpu-kit
rc=0
PYTHONUNBUFFERED=1 "$PYTHON" -m benchmarks.gpu_checks --python "$PYTHON" --out runs/gpu_checks "$@" || rc=$?
mkdir -p "$DEST"
cp runs/gpu_checks/summary.md runs/gpu_checks/gpu_checks.tar.gz "$DEST"/
exit "$rc"
