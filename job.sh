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
CLM=tests/hopper/gemm_bf16_wgmma_cluster_m.arg
WG=tests/hopper/gemm_bf16_wgmma_wg.arg
PER=tests/hopper/gemm_bf16_wgmma_persistent.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >"$out/gpu.txt" 2>&1
RAGGED=150x200x328,64x136x64,130x8x8,257x264x200,1000x1000x1000,300x1096x520,2000x520x72

step cluster_p 30 100 $B --spec $CLP --out "$out/cluster_p" --ragged $RAGGED
step cluster_n 30 90 $B --spec $CL --out "$out/cluster_n" --ragged $RAGGED
step persistent 25 80 $B --spec $PER --out "$out/persistent" --ragged 150x200x328
step wg 25 70 $B --spec $WG --out "$out/wg" --ragged 150x200x328
step cluster_m 25 60 $B --spec $CLM --out "$out/cluster_m" --ragged 150x200x328,300x264x200,1000x1000x1000
step cluster_p_cl4 25 50 $B --spec $CLP --consts CL=4 --out "$out/cluster_p_cl4" --ragged 257x264x200,300x1096x520
for tool in memcheck racecheck synccheck; do
  step san_p_$tool 25 25 compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
      --check-only --spec $CLP --consts SMS=8,GROUP=2 --ragged 300x1096x328 --out "$out/san_p_$tool"
  step san_n_$tool 25 20 compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
      --check-only --spec $CL --ragged 150x600x328 --out "$out/san_n_$tool"
done
step variants_p 60 0 python3 bench/cluster_variants.py --out "$out/variants_p" --spec $CLP
echo
for n in cluster_p cluster_n cluster_m cluster_p_cl4 persistent wg variants_p; do
  echo "== $n"; grep -E '^\||^check|loaded|arg$' "$out/$n.log" 2>/dev/null; done
echo "== summary"; cat "$out/summary.txt"
