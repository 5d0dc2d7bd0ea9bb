#!/usr/bin/env bash
# On a GPU machine that cannot reach the package index, from the repository root with the kit's
# bundles under .gpu-kit (`make gpu-kit` on a machine that can): install the kit and this project
# into the machine's own Python (the one with its CUDA PyTorch), then run every GPU check.
# Arguments go to benchmarks.gpu_checks, e.g. `bash benchmarks/gpu_device.sh --budget-s 540 --out DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m benchmarks.gpu_kit install .gpu-kit
PYTHONUNBUFFERED=1 exec "$PYTHON" -m benchmarks.gpu_checks --python "$PYTHON" "$@"
