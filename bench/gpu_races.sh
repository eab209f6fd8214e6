#!/usr/bin/env bash
# One device call (2026-12-03): what the GPU does with the global races and partial warp collectives
# the verifier now reports (bench/gpu_races.py), the final Hopper spec against cuBLAS again, and
# pytest -m cuda.
#   source .device-carry/on-device.sh && bash bench/gpu_races.sh $OUT
set -uo pipefail
source "$(dirname "$0")/device_summary.sh" "${1:-}"
timeout 240 python3 bench/gpu_races.py --out "$out" --launches 20 --timeout 30 > "$out/races.log" 2>&1
note "gpu_races rc=$?"; tail -11 "$out/races.log" | tee -a "$summary"
timeout 200 python3 bench/hopper_steps.py --out $out --rounds 5 --reps 20 --budget 180 \
  --shapes 4096x4096x4096,8192x8192x8192 prefetch=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg > $out/steps.log 2>&1
note "steps rc=$?"; tail -6 $out/steps.log | tee -a "$summary"
timeout 120 python3 -m pytest -m cuda tests -q -p no:cacheprovider -x > $out/pytest_cuda.log 2>&1
note "pytest -m cuda: $(tail -1 $out/pytest_cuda.log)"
cat "$summary"
