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
CL=tests/hopper/gemm_bf16_wgmma_cluster.arg
CLM=tests/hopper/gemm_bf16_wgmma_cluster_m.arg
CLP=tests/hopper/gemm_bf16_wgmma_cluster_persistent.arg
WG=tests/hopper/gemm_bf16_wgmma_wg.arg
PER=tests/hopper/gemm_bf16_wgmma_persistent.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >"$out/gpu.txt" 2>&1
RAGGED=150x200x328,64x136x64,130x8x8,257x264x200,1000x1000x1000,300x1100x520

step probe 40 120 python3 bench/cluster_probe.py --out "$out"
step cluster_n 80 90 python3 bench/gemm_wgmma.py --no-verify --spec $CL --reps 15 --out "$out/cluster_n" --ragged $RAGGED
step cluster_p 60 80 python3 bench/gemm_wgmma.py --no-verify --spec $CLP --reps 15 --out "$out/cluster_p" --ragged $RAGGED
step wg 40 60 python3 bench/gemm_wgmma.py --no-verify --spec $WG --reps 15 --out "$out/wg" --ragged 150x200x328
step persistent 40 50 python3 bench/gemm_wgmma.py --no-verify --spec $PER --reps 15 --out "$out/persistent" --ragged 150x200x328
step memcheck 40 45 compute-sanitizer --tool memcheck --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
    --check-only --spec $CL --ragged 150x600x328 --out "$out/san_memcheck"
step cluster_m 50 30 python3 bench/gemm_wgmma.py --no-verify --spec $CLM --reps 15 --out "$out/cluster_m" \
    --ragged 150x200x328,300x264x200,1000x1000x1000
for tool in racecheck synccheck; do
  step $tool 40 5 compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
      --check-only --spec $CL --ragged 150x600x328 --out "$out/san_$tool"
done
echo
for n in cluster_n cluster_p cluster_m wg persistent; do echo "== $n"; grep -E '^\||^check|loaded' "$out/$n.log" 2>/dev/null; done
echo "== summary"; cat "$out/summary.txt"
