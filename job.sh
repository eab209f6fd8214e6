#!/usr/bin/env bash
# GPU queue job of helper epi (batch 3): regression checks after the driver-API launch of tensor-map
# kernels, argus bench with the bf16 baseline, device_session.sh's Hopper sanitizer lines.
# $1 = result dir, $2 = seconds allowed.
out=${1:-/tmp/epi-out}; limit=${2:-180}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( limit - ($(date +%s) - start) )); }
store=tests/hopper/gemm_bf16_wgmma_store.arg
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
# 1. the GPU tests of the API and the specs (the non-TMA launch path), and the Hopper ones
timeout $(( limit / 2 )) python3 -m pytest -q -p no:cacheprovider -m cuda tests/gpu/test_api_gpu.py tests/gpu/test_specs_gpu.py \
  tests/test_hopper.py tests/test_hopper_store.py > "$out/pytest_cuda.log" 2>&1
echo "pytest -m cuda (api, specs, hopper, hopper_store): rc=$? $(tail -1 "$out/pytest_cuda.log")"
grep -E "^FAILED|Error" "$out/pytest_cuda.log" | head -10
# 2. argus bench with the bf16 cuBLAS baseline
for shape in M=4096,N=4096,K=4096 M=8192,N=8192,K=8192; do
  [ "$(left)" -lt 50 ] && { echo "argus bench $shape: skipped (time)"; continue; }
  timeout 45 argus bench $store --no-verify --shape $shape --reps 20 > "$out/argus_bench_$shape.log" 2>&1
  echo "argus bench store $shape: rc=$? $(tail -5 "$out/argus_bench_$shape.log" | tr '\n' ' ')"
done
# 3. device_session.sh's Hopper lines (verify, --allow-unknown, memcheck)
for spec in specs/hopper/gemm_bf16_wgmma.arg $store; do
  [ "$(left)" -lt 40 ] && { echo "sanitizer memcheck $spec: skipped (time)"; continue; }
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no \
    argus run "$spec" --backend cuda --allow-unknown --shape M=150,N=200,K=328 > "$out/san_$(basename $spec .arg).log" 2>&1
  echo "sanitizer memcheck $(basename $spec) (verified, --allow-unknown): rc=$? $(grep -h -E 'ERROR SUMMARY|PASS|FAIL' "$out/san_$(basename $spec .arg).log" | tail -2 | tr '\n' ' ')"
done
