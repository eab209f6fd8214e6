#!/usr/bin/env bash
# GPU queue job of helper "cluster" (issue 10: thread-block clusters with TMA multicast).
# $1: result dir, $2: seconds allowed. Time-aware: each step gets what is left, minus a reserve.
out=${1:-bench-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$out"
left() { echo $(( lim - ($(date +%s) - start) )); }
note() { echo "$*" | tee -a "$out/summary.txt"; }
step() {  # step NAME MAX RESERVE cmd...: run with min(MAX, left - RESERVE) seconds, if at least 15
  local name=$1 max=$2 reserve=$3; shift 3
  local t=$(( $(left) - reserve )); [ $t -gt $max ] && t=$max
  if [ $t -lt 15 ]; then note "$name: no time left"; return 99; fi
  timeout $t "$@" >"$out/$name.log" 2>&1; local rc=$?
  note "$name: rc=$rc ($(( $(date +%s) - start ))s) $(grep -h -E 'checks:|ERROR SUMMARY|RACECHECK SUMMARY' "$out/$name.log" | tr '\n' ' ')"
  return $rc
}
B="python3 bench/gemm_wgmma.py --no-verify --reps 20"
CL=tests/hopper/gemm_bf16_wgmma_cluster.arg
CLP=tests/hopper/gemm_bf16_wgmma_cluster_persistent.arg
WG=tests/hopper/gemm_bf16_wgmma_wg.arg
PER=tests/hopper/gemm_bf16_wgmma_persistent.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >"$out/gpu.txt" 2>&1
RAGGED=150x200x328,64x136x64,130x8x8,257x264x200,1000x1000x1000,300x1096x520,2000x520x72

step variants_p 80 60 python3 bench/cluster_variants.py --out "$out/variants_p" --spec $CLP
step variants_n 60 5 python3 bench/cluster_variants.py --out "$out/variants_n" --spec $CL
echo
for n in variants_p variants_n; do echo "== $n"; grep -E '^\||arg$' "$out/$n.log" 2>/dev/null; done
echo "== summary"; cat "$out/summary.txt"
