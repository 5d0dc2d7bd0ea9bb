#!/usr/bin/env bash
# On a GPU machine that cannot reach the package index, from the repository root with a kit's
# bundles under $KIT (default .gpu-kit: `make gpu-kit` on a machine that can; .gpu-kit-libero with
# `--suite libero`: `make gpu-kit-libero`): install the kit and this project into the machine's own
# Python (the one with its CUDA PyTorch), run the GPU checks into runs/gpu_checks, and copy its
# summary.md and gpu_checks.tar.gz to DEST.
#   bash benchmarks/gpu_device.sh DEST [benchmarks.gpu_checks options, e.g. --budget-s 540]
#   KIT=.gpu-kit-libero bash benchmarks/gpu_device.sh DEST --suite libero --budget-s 540
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:?give the folder that receives summary.md and gpu_checks.tar.gz}
shift
PYTHON=${PYTHON:-python3}
"$PYTHON" -m benchmarks.gpu_kit install "${KIT:-.gpu-kit}"
export MUJOCO_GL=egl PYOPENGL_PLATFORM=egl  # LIBERO renders headless
rc=0
PYTHONUNBUFFERED=1 "$PYTHON" -m benchmarks.gpu_checks --python "$PYTHON" --out runs/gpu_checks "$@" || rc=$?
mkdir -p "$DEST"
cp runs/gpu_checks/summary.md runs/gpu_checks/gpu_checks.tar.gz "$DEST"/
exit "$rc"
