#!/usr/bin/env bash
# One device call for issue 10's closing figures: compute-sanitizer (memcheck, racecheck, synccheck)
# over the final Hopper spec at a ragged shape, then its speed against cuBLAS at the issue's four
# shapes (default options and the two measured alternatives), interleaved in one process.
# Usage on the device machine: source .device-carry/on-device.sh && bash bench/gpu_final_check.sh $OUT [ROUNDS]
set -uo pipefail
out=${1:-/tmp/argus-out}; rounds=${2:-11}
mkdir -p "$out"; summary="$out/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$summary"
P=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg
for shape in M=150,N=200,K=328 M=257,N=264,K=200; do
    for tool in memcheck racecheck synccheck; do
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
            argus run "$P" --backend cuda --no-verify --shape "$shape" >>"$out/sanitizer.log" 2>&1
        note "sanitizer $tool $shape: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer.log" | tail -1)"
    done
done
timeout 420 python3 bench/hopper_steps.py --out "$out" --rounds "$rounds" --reps 20 --budget 380 \
    --shapes 8192x8192x8192,4096x4096x4096,2048x2048x2048,4096x14336x4096 \
    default=$P g16=$P:GROUP=16 bn192=$P:BN=192,STAGES=4 >"$out/steps.txt" 2>&1
note "steps rc=$?"
note "$(tail -8 "$out/steps.txt")"
echo "== table"; cat "$summary"
