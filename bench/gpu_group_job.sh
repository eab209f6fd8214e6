set -u
out=$OUT
git rev-parse --short HEAD > $out/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $out/gpu.txt
P=tests/hopper/gemm_bf16_wgmma_store_prefetch.arg
timeout 330 python3 bench/hopper_steps.py --out $out --rounds 9 --reps 20 --budget 300 \
  default=$P g16=$P:GROUP=16 bn192=$P:BN=192,STAGES=4 bn192g16=$P:BN=192,STAGES=4,GROUP=16 > $out/steps.log 2>&1
echo "steps rc=$?"; tail -12 $out/steps.log
timeout 200 python3 -m pytest -m cuda tests -q -p no:cacheprovider -x > $out/pytest_cuda.log 2>&1
echo "pytest cuda: $(tail -1 $out/pytest_cuda.log)"
