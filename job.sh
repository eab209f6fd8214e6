#!/usr/bin/env bash
# GPU queue job of helper epi: the TMA-store epilogue (tests/hopper/gemm_bf16_wgmma_store*.arg).
# $1 = result dir, $2 = seconds allowed.
out=${1:-/tmp/epi-out}; limit=${2:-180}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
store=tests/hopper/gemm_bf16_wgmma_store.arg
pref=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 -c "
from argus_verify.frontend import compile_file
from argus_verify.lowering.ptx import lower
open('$out/store.ptx','w').write(lower(compile_file('$store')).ptx)"
ptxas -arch=sm_90a -v "$out/store.ptx" -o "$out/store.cubin" 2>&1 | tail -2
# 1. argus run builds the tensor maps itself (PyCUDA path), ragged shapes, checked against the reference
for shape in M=150,N=200,K=328 M=257,N=264,K=200 M=1000,N=1000,K=1000; do
  timeout 60 argus run $store --backend cuda --no-verify --shape $shape >>"$out/argus_run.log" 2>&1
  echo "argus run store $shape: rc=$? $(grep -E 'PASS|FAIL|rror' "$out/argus_run.log" | tail -1)"
done
timeout 60 argus run specs/hopper/gemm_bf16_wgmma.arg --backend cuda --no-verify --shape M=257,N=264,K=200 >>"$out/argus_run.log" 2>&1
echo "argus run gemm_bf16_wgmma (f32 C) 257x264x200: rc=$? $(grep -E 'PASS|FAIL|rror' "$out/argus_run.log" | tail -1)"
# 2. correctness (ragged) and timing next to cuBLAS: the store epilogue, with prefetch, then the persistent spec (f32 C)
for v in store:$store:60 prefetch:$pref:50 persistent:$pers:40; do
  name=${v%%:*}; rest=${v#*:}; spec=${rest%%:*}; budget=${rest#*:}
  [ "$(left)" -lt 40 ] && { echo "bench $name: skipped (time)"; continue; }
  ragged=""; [ $name = persistent ] && ragged="--ragged 150x200x328"
  timeout $(( budget + 25 )) python3 bench/gemm_wgmma.py --no-verify --spec $spec --reps 15 --budget $budget \
    --out "$out/$name" $ragged > "$out/bench_$name.log" 2>&1
  echo "bench $name rc=$?"; grep -E "^check|^time|^loaded|^C:" "$out/bench_$name.log"
done
# 3. compute-sanitizer through argus run
for tool in memcheck racecheck synccheck; do
  [ "$(left)" -lt 25 ] && { echo "sanitizer $tool: skipped (time)"; continue; }
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
    argus run $store --backend cuda --no-verify --shape M=150,N=200,K=328 > "$out/san_$tool.log" 2>&1
  echo "sanitizer $tool store 150x200x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL' "$out/san_$tool.log" | tail -2 | tr '\n' ' ')"
done
[ "$(left)" -gt 50 ] && { timeout 40 argus bench $store --no-verify --shape M=4096,N=4096,K=4096 --reps 20 > "$out/argus_bench.log" 2>&1;
  echo "argus bench store 4096^3: rc=$? $(grep -i -E 'ms|tflop|baseline|error' "$out/argus_bench.log" | tail -4 | tr '\n' ' ')"; }
[ "$(left)" -gt 30 ] && timeout $(( $(left) - 5 )) python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_hopper_store.py > "$out/pytest_cuda.log" 2>&1
echo "pytest -m cuda tests/test_hopper_store.py: $(tail -1 "$out/pytest_cuda.log" 2>/dev/null)"
echo "== table"
for v in store prefetch persistent; do echo "-- $v"; grep -h -A8 "^| shape" "$out/bench_$v.log"; done
