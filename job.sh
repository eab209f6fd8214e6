#!/usr/bin/env bash
# GPU queue job of helper epi: the TMA-store epilogue (tests/hopper/gemm_bf16_wgmma_store.arg).
# $1 = result dir, $2 = seconds allowed.
out=${1:-/tmp/epi-out}; limit=${2:-180}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
store=tests/hopper/gemm_bf16_wgmma_store.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 -c "import cuda.bindings, pycuda; print('cuda-python and pycuda present')"
python3 -c "
from argus_verify.frontend import compile_file
from argus_verify.lowering.ptx import lower
open('$out/store.ptx','w').write(lower(compile_file('$store')).ptx)"
ptxas -arch=sm_90a -v "$out/store.ptx" -o "$out/store.cubin" 2>&1 | tail -2
# 1. argus run builds the tensor maps itself (PyCUDA path), ragged shapes, checked against the reference
for shape in M=150,N=200,K=328 M=257,N=264,K=200 M=1000,N=1000,K=1000; do
  timeout 60 argus run $store --backend cuda --allow-unknown --shape $shape >>"$out/argus_run.log" 2>&1
  echo "argus run store $shape: rc=$? $(grep -E 'PASS|FAIL|error' "$out/argus_run.log" | tail -1)"
done
# 2. correctness (ragged) and timing next to cuBLAS: the store epilogue, then the persistent spec (f32 C)
timeout $(( $(left) / 2 > 90 ? 90 : $(left) / 2 )) python3 bench/gemm_wgmma.py --no-verify --spec $store --reps 15 \
  --budget 60 --out "$out/store" > "$out/bench_store.log" 2>&1
echo "bench store rc=$?"; grep -E "^check|^time|^loaded|^C:" "$out/bench_store.log"
timeout $(( $(left) / 2 > 60 ? 60 : $(left) / 2 )) python3 bench/gemm_wgmma.py --no-verify --spec $pers --reps 15 \
  --budget 40 --out "$out/persistent" --ragged 150x200x328 > "$out/bench_pers.log" 2>&1
echo "bench persistent rc=$?"; grep -E "^check|^time|^loaded" "$out/bench_pers.log"
# 3. compute-sanitizer through argus run
for tool in memcheck racecheck synccheck; do
  [ "$(left)" -lt 25 ] && { echo "sanitizer $tool: skipped (time)"; continue; }
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
    argus run $store --backend cuda --allow-unknown --shape M=150,N=200,K=328 > "$out/san_$tool.log" 2>&1
  echo "sanitizer $tool store 150x200x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tail -1)"
done
echo "== table"
grep -h -A8 "^| shape" "$out/bench_store.log" "$out/bench_pers.log"
