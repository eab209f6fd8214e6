#!/usr/bin/env bash
# GPU batch 3 for the warp-specialised GEMM: interleaved timing of the persistent spec and ws variants
# next to cuBLAS in one process (bench/gemm_wgmma_ab.py), ncu stall sections of both at 4096^3, and
# compute-sanitizer on the INFLIGHT=2 variant. $1: result dir, $2: seconds.
set -uo pipefail
res=${1:-/tmp/ws-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$res"
left() { echo $(( lim - ($(date +%s) - start) )); }
ws=tests/hopper/gemm_bf16_wgmma_ws.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
summary="$res/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"

timeout $(( $(left) - 60 )) python3 bench/gemm_wgmma_ab.py --out "$res" --rounds 5 --reps 10 \
    --variant "persistent=$pers" --variant "ws=$ws" ${AB_VARIANTS:---variant "ws_inflight2=$ws:INFLIGHT=2" \
    --variant "ws_group16=$ws:GROUP=16"} >"$res/ab.log" 2>&1
note "ab rc=$?"
note "$(grep -E '^\||check' "$res/ab.log")"

for spec in ${NCU_SPECS-ws:$ws persistent:$pers}; do
    name=${spec%%:*}; path=${spec#*:}
    [ "$(left)" -lt 45 ] && { note "ncu $name: skipped (time)"; continue; }
    timeout 40 ncu --kernel-name regex:gemm_bf16 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats python3 bench/gemm_wgmma.py --no-verify --check-only --spec "$path" \
        --ragged 4096x4096x4096 --out "$res/ncu_$name" >"$res/ncu_$name.log" 2>&1
    note "ncu $name 4096^3: rc=$?"
    note "$(grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Stall|Active Warps' "$res/ncu_$name.log" | head -20)"
done

for tool in ${SAN_TOOLS-memcheck racecheck synccheck}; do
    [ "$(left)" -lt 25 ] && { note "sanitizer $tool: skipped (time)"; continue; }
    timeout 50 compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
        --check-only --spec $ws --consts SMS=8,INFLIGHT=2 --ragged 150x200x328,257x264x600 --out "$res/san_$tool" >"$res/san_$tool.log" 2>&1
    note "sanitizer $tool ws INFLIGHT=2 150x200x328,257x264x600 SMS=8: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks:' "$res/san_$tool.log" | tr '\n' ' ')"
done
echo "== table"; cat "$summary"
