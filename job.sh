#!/usr/bin/env bash
# GPU queue batch of the perf helper: the store+prefetch GEMM's variants timed against cuBLAS in one
# process (bench/hopper_steps.py: ragged check first, interleaved rounds), then compute-sanitizer on
# the variants at a small ragged shape with several tiles per block. $1: result dir, $2: seconds.
set -uo pipefail
res=${1:-/tmp/perf-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$res"
left() { echo $(( lim - ($(date +%s) - start) )); }
summary="$res/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(date -u +%FT%TZ) $(cat COMMIT 2>/dev/null || echo "commit unknown") $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)"
H=tests/hopper
STEPS=(
  "prefetch=$H/gemm_bf16_wgmma_store_prefetch.arg"
  "prefetch_g16=$H/gemm_bf16_wgmma_store_prefetch.arg:GROUP=16"
  "n192s4=$H/gemm_bf16_wgmma_store_prefetch.arg:BN=192,STAGES=4"
  "n192s4_g16=$H/gemm_bf16_wgmma_store_prefetch.arg:BN=192,STAGES=4,GROUP=16"
  "n192s3=$H/gemm_bf16_wgmma_store_prefetch.arg:BN=192,STAGES=3"
  "direct4_g16=$H/gemm_bf16_wgmma_direct_prefetch.arg:GROUP=16"
)
timeout $(( lim * 6 / 10 )) python3 bench/hopper_steps.py --out "$res" --rounds 7 --reps 20 --budget $(( lim * 4 / 10 )) \
    --shapes 8192x8192x8192,4096x4096x4096,4096x14336x4096,2048x2048x2048 "${STEPS[@]}" >"$res/steps.log" 2>&1
note "hopper_steps rc=$?"
note "$(grep -E 'check|^\|' "$res/steps.log")"

# compute-sanitizer: 300x520x328 with SMS=2 (9 tiles, 2 blocks, 6 k tiles each: the rings run across tiles)
SAN=("$H/gemm_bf16_wgmma_store_prefetch.arg BN=192,STAGES=4,SMS=2" "$H/gemm_bf16_wgmma_store_prefetch.arg GROUP=16,SMS=2")
for item in "${SAN[@]}"; do
    set -- $item; spec=$1; consts=$2; name="$(basename "$spec" .arg)_${consts//[=,]/_}"
    for tool in memcheck racecheck synccheck; do
        [ "$(left)" -lt 20 ] && { note "sanitizer $tool $name: skipped (time)"; continue; }
        timeout $(( $(left) - 5 )) compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
            argus run "$spec" --const "$consts" --backend cuda --no-verify --shape M=300,N=520,K=328 \
            >"$res/san_${name}_$tool.log" 2>&1
        note "sanitizer $tool $name $consts 300x520x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL' "$res/san_${name}_$tool.log" | tr '\n' ' ' | cut -c1-200)"
    done
done
echo "== table"; cat "$summary"
