#!/usr/bin/env bash
# GPU queue job of helper epi (batch 2): the TMA-store epilogue (tests/hopper/gemm_bf16_wgmma_store*.arg),
# `argus run` / bench / API launching kernels that take tensor maps. $1 = result dir, $2 = seconds allowed.
out=${1:-/tmp/epi-out}; limit=${2:-180}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
store=tests/hopper/gemm_bf16_wgmma_store.arg
pref=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
f32=specs/hopper/gemm_bf16_wgmma.arg
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
# 0. which launch of a tensor-map kernel is right (batch 1: the PyCUDA packed-buffer path wrote nothing)
for v in driver-ptx pycuda-cubin driver-cubin pycuda-ptx; do
  timeout 40 python3 bench/tma_launch_check.py $v $f32 257x264x200 >>"$out/launch_check.log" 2>&1
  echo "launch check $v f32-C spec: rc=$? $(tail -1 "$out/launch_check.log")"
done
timeout 40 python3 bench/tma_launch_check.py driver-ptx $store 257x264x200 >>"$out/launch_check.log" 2>&1
echo "launch check driver-ptx store spec: rc=$? $(tail -1 "$out/launch_check.log")"
# 1. argus run builds the tensor maps itself, ragged shapes, checked against the reference
for shape in M=150,N=200,K=328 M=257,N=264,K=200 M=1000,N=1000,K=1000; do
  timeout 60 argus run $store --backend cuda --no-verify --shape $shape >>"$out/argus_run.log" 2>&1
  echo "argus run store $shape: rc=$? $(grep -E 'PASS|FAIL|rror' "$out/argus_run.log" | tail -1)"
done
timeout 60 argus run $f32 --backend cuda --no-verify --shape M=257,N=264,K=200 >>"$out/argus_run.log" 2>&1
echo "argus run gemm_bf16_wgmma (f32 C) 257x264x200: rc=$? $(grep -E 'PASS|FAIL|rror' "$out/argus_run.log" | tail -1)"
# 2. compute-sanitizer through argus run (the store spec and the f32-C spec)
for spec in $store $f32; do
  for tool in memcheck racecheck synccheck; do
    [ "$(left)" -lt 100 ] && { echo "sanitizer $tool $spec: skipped (time)"; continue; }
    timeout 45 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
      argus run $spec --backend cuda --no-verify --shape M=150,N=200,K=328 > "$out/san_${tool}_$(basename $spec .arg).log" 2>&1
    echo "sanitizer $tool $(basename $spec) 150x200x328: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL' "$out/san_${tool}_$(basename $spec .arg).log" | tail -2 | tr '\n' ' ')"
  done
done
# 3. timing next to cuBLAS in the same process each: the store epilogue, then the persistent spec (f32 C)
for v in store:$store:45 persistent:$pers:35 prefetch:$pref:35; do
  name=${v%%:*}; rest=${v#*:}; spec=${rest%%:*}; budget=${rest#*:}
  [ "$(left)" -lt $(( budget + 10 )) ] && { echo "bench $name: skipped (time)"; continue; }
  timeout $(( budget + 20 )) python3 bench/gemm_wgmma.py --no-verify --spec $spec --reps 20 --budget $budget \
    --out "$out/$name" --ragged 257x264x200 > "$out/bench_$name.log" 2>&1
  echo "bench $name rc=$?"; grep -E "^check|^time|^loaded|^C:" "$out/bench_$name.log"
done
[ "$(left)" -gt 40 ] && { timeout 35 argus bench $store --no-verify --shape M=4096,N=4096,K=4096 --reps 20 > "$out/argus_bench.log" 2>&1;
  echo "argus bench store 4096^3: rc=$? $(tail -6 "$out/argus_bench.log" | tr '\n' ' ')"; }
[ "$(left)" -gt 30 ] && timeout $(( $(left) - 5 )) python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_hopper_store.py > "$out/pytest_cuda.log" 2>&1
echo "pytest -m cuda tests/test_hopper_store.py: $(tail -1 "$out/pytest_cuda.log" 2>/dev/null)"
echo "== table"
for v in store persistent prefetch; do echo "-- $v"; grep -h -A8 "^| shape" "$out/bench_$v.log"; done
