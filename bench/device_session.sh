#!/usr/bin/env bash
# One device call for a session's GPU work: the cuda-marked tests, the spec benchmarks, the bf16
# tensor-core GEMM and the mma.sync ceiling, and compute-sanitizer over the kernels that are new.
# Usage on the device machine:
#   source .device-carry/on-device.sh && bash bench/device_session.sh $OUT [--no-bench | --hopper-bench]
# Logs go to $OUT; a short table is printed last. --no-bench skips the timed benchmarks (the mma.sync
# ceiling and the GEMM variants), which the issue branches measure on their own; --hopper-bench times
# only the Hopper GEMM's steps (bench/hopper_steps.py).
set -uo pipefail
out=${1:-/tmp/argus-out}
bench=1; [ "${2:-}" = "--no-bench" ] && bench=0
hopper_only=0; [ "${2:-}" = "--hopper-bench" ] && hopper_only=1
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

note "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$summary"

echo "== pytest -m cuda"
timeout 240 python3 -m pytest -m cuda tests -q -p no:cacheprovider >"$out/pytest_cuda.log" 2>&1
note "pytest -m cuda: $(tail -1 "$out/pytest_cuda.log")"

echo "== compute-sanitizer"
for spec in gemm_bf16_mma:M=200,N=136,K=88 gemm_bf16_mma_c16:M=200,N=136,K=88 reduce_pipe3:M=37,N=3000 gemm_pipe3_32x128:M=130,N=200,K=77 \
            shfl_down_broadcast:M=37,N=100 guarded_stage:N=1000; do
    name=${spec%%:*}; shape=${spec#*:}
    [ -f "specs/$name.arg" ] || { note "sanitizer $name: no spec"; continue; }
    for tool in memcheck racecheck synccheck; do
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 \
            argus run "specs/$name.arg" --backend cuda --shape "$shape" >>"$out/sanitizer.log" 2>&1
        note "sanitizer $tool $name $shape: rc=$?"
    done
done

# the Hopper GEMMs through `argus run`, which builds their TMA tensor maps (cuda-python) and launches
# clusters. Verification is the suite's part (the persistent specs take minutes): --no-verify here
for spec in specs/hopper/gemm_bf16_wgmma.arg tests/hopper/gemm_bf16_wgmma_ws.arg tests/hopper/gemm_bf16_wgmma_store.arg \
            tests/hopper/gemm_bf16_wgmma_store_prefetch.arg tests/hopper/gemm_bf16_wgmma_cluster.arg; do
    [ -f "$spec" ] || continue
    name=$(basename "$spec" .arg)
    for tool in memcheck racecheck synccheck; do
        # --report-api-errors no: cuda-python probes driver entry points (cuGetProcAddress) with
        # arguments the driver refuses; those host-side API errors are not the kernel's
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
            argus run "$spec" --backend cuda --no-verify --shape M=150,N=200,K=328 >>"$out/sanitizer.log" 2>&1
        note "sanitizer $tool $name 150x200x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer.log" | tail -1)"
    done
done

[ "$bench" = 1 ] || { echo "== table"; cat "$summary"; exit 0; }
if [ "$hopper_only" = 0 ]; then
echo "== mma.sync ceiling and bf16 GEMM"
[ -f bench/mma_peak.py ] && timeout 120 python3 bench/mma_peak.py --out "$out" >"$out/mma_peak.txt" 2>&1
[ -f bench/mma_peak.py ] && note "$(tail -6 "$out/mma_peak.txt")"
[ -f bench/gemm_bf16.py ] && timeout 300 python3 bench/gemm_bf16.py --out "$out" >"$out/gemm_bf16.txt" 2>&1
[ -f bench/gemm_bf16.py ] && note "$(tail -16 "$out/gemm_bf16.txt")"
fi

echo "== Hopper GEMM steps, interleaved with cuBLAS in one process"
timeout 300 python3 bench/hopper_steps.py --out "$out" --budget 240 \
    1wg=specs/hopper/gemm_bf16_wgmma.arg 2wg=tests/hopper/gemm_bf16_wgmma_wg.arg \
    persistent=tests/hopper/gemm_bf16_wgmma_persistent.arg ws=tests/hopper/gemm_bf16_wgmma_ws.arg \
    store=tests/hopper/gemm_bf16_wgmma_store.arg prefetch=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg \
    cluster=tests/hopper/gemm_bf16_wgmma_cluster.arg >"$out/hopper_steps.txt" 2>&1
note "$(tail -10 "$out/hopper_steps.txt")"

echo "== table"
cat "$summary"
