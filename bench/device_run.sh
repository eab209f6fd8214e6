#!/usr/bin/env bash
# One device call: the cuda test suite, the milestone-3 benchmark and `argus bench` on each spec.
# Usage on the device machine: source .device-carry/on-device.sh && bash bench/device_run.sh $OUT
set -uo pipefail
out=${1:-/tmp/argus-out}
mkdir -p "$out"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== pytest -m cuda"
python3 -m pytest -m cuda tests/gpu -q -p no:cacheprovider 2>&1 | tee "$out/pytest_cuda.log" | tail -5
echo "== argus bench"
for spec in vecadd:N=67108864 transpose_smem:M=8192,N=8192 row_softmax:M=16384,N=1024 \
            reduce_sum:M=16384,N=4096 gemm_simt:M=4096,N=4096,K=4096; do
    name=${spec%%:*}; shape=${spec#*:}
    argus bench specs/$name.arg --shape "$shape" 2>&1 | tee -a "$out/argus_bench.log"
done
echo "== bench/gpu_all.py"
python3 bench/gpu_all.py --out "$out" 2>&1 | tail -30
