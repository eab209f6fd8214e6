#!/usr/bin/env bash
# One device call (2026-12-03): masked accesses at negative coordinates under compute-sanitizer, the
# persistent GEMMs whose epilogues gained lower-bound checks timed next to cuBLAS, and pytest -m cuda.
#   source .device-carry/on-device.sh && bash bench/gpu_negcoord.sh $OUT
set -uo pipefail
source "$(dirname "$0")/device_summary.sh" "${1:-}"
mkdir -p "$out/k"
# the kernels of tests/test_negative_coordinates.py, written out with their references
python3 - "$out/k" <<'PY'
import sys, pathlib
sys.path.insert(0, "tests")
import test_negative_coordinates as T
d = pathlib.Path(sys.argv[1])
for name in T.KERNELS:
    T._write(d, name, {"SHIFT": 4} if name == "shiftcp" else {})
(d / "mirror.arg").write_text(T.MIRROR)
PY
for spec in negload:N=1000 negstore:N=1000 shiftrow:M=37,N=100 shiftcp:M=37,N=100:SHIFT=4; do
    name=${spec%%:*}; rest=${spec#*:}; shape=${rest%%:*}; consts=${rest#"$shape"}; consts=${consts#:}
    for tool in memcheck racecheck; do
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 \
            argus run "$out/k/$name.arg" --backend cuda --shape "$shape" ${consts:+--const "$consts"} >>"$out/sanitizer.log" 2>&1
        note "sanitizer $tool $name $shape: rc=$?"
    done
done
timeout 330 python3 bench/hopper_steps.py --out $out --rounds 5 --reps 20 --budget 300 --shapes 4096x4096x4096,8192x8192x8192 \
  persistent=tests/hopper/gemm_bf16_wgmma_persistent.arg direct_prefetch=tests/hopper/gemm_bf16_wgmma_direct_prefetch.arg \
  prefetch=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg > $out/steps.log 2>&1
note "steps rc=$?"; tail -8 $out/steps.log | tee -a "$summary"
timeout 150 python3 -m pytest -m cuda tests -q -p no:cacheprovider -x > $out/pytest_cuda.log 2>&1
note "pytest -m cuda: $(tail -1 $out/pytest_cuda.log)"
cat "$summary"
