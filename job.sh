#!/usr/bin/env bash
# GPU queue job of helper "cluster" (issue 10: thread-block clusters with TMA multicast).
# $1: result dir, $2: seconds allowed. Time-aware: each step gets what is left, minus a reserve.
out=${1:-bench-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$out"
left() { echo $(( lim - ($(date +%s) - start) )); }
note() { echo "$*" | tee -a "$out/summary.txt"; }
CL=tests/hopper/gemm_bf16_wgmma_cluster.arg
WG=tests/hopper/gemm_bf16_wgmma_wg.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >"$out/gpu.txt" 2>&1

timeout 40 python3 bench/cluster_probe.py --out "$out" >"$out/probe.log" 2>&1
note "probe rc=$? $(grep -c '"ok": true' "$out/probe.log") launch path(s) ok"

t=$(( $(left) - 70 )); [ $t -gt 100 ] && t=100
if [ $t -gt 20 ]; then
  timeout $t python3 bench/gemm_wgmma.py --no-verify --spec $CL --reps 15 --out "$out/cluster" \
      --ragged 150x200x328,64x136x64,130x8x8,257x264x200,1000x1000x1000,300x1100x520 >"$out/cluster.log" 2>&1
  note "cluster gemm rc=$? $(grep -E 'checks:' "$out/cluster.log")"
fi
t=$(( $(left) - 40 )); [ $t -gt 60 ] && t=60
if [ $t -gt 20 ]; then
  timeout $t python3 bench/gemm_wgmma.py --no-verify --spec $WG --reps 15 --out "$out/wg" --ragged 150x200x328 \
      >"$out/wg.log" 2>&1
  note "wg gemm (the step base) rc=$?"
fi
for tool in memcheck racecheck synccheck; do
  t=$(( $(left) - 5 )); [ $t -gt 40 ] && t=40
  [ $t -lt 15 ] && { note "sanitizer $tool: no time left"; continue; }
  timeout $t compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
      --check-only --spec $CL --ragged 150x600x328 --out "$out/san_$tool" >"$out/san_$tool.log" 2>&1
  note "sanitizer $tool 150x600x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks:' "$out/san_$tool.log" | tr '\n' ' ')"
done
echo; echo "== cluster"; grep -E '^\||check ' "$out/cluster.log" 2>/dev/null
echo "== wg (step base)"; grep -E '^\|' "$out/wg.log" 2>/dev/null
echo "== summary"; cat "$out/summary.txt"
