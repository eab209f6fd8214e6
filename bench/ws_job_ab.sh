#!/usr/bin/env bash
# GPU batch 3 for the warp-specialised GEMM: interleaved timing of the persistent spec and ws variants
# next to cuBLAS in one process (bench/gemm_wgmma_ab.py), ncu stall sections of both at 4096^3, and
# compute-sanitizer on the INFLIGHT=2 variant. $1: result dir, $2: seconds.
source "$(dirname "$0")/ws_common.sh"  # $1, $2, left, note, ws, pers, sanitize

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

# SAN_TOOLS: a word list (unquoted on purpose); empty: no sanitizer
sanitize "INFLIGHT=2" 25 50 ${SAN_TOOLS-memcheck racecheck synccheck}
echo "== table"; cat "$summary"
