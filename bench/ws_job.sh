#!/usr/bin/env bash
# GPU batch for the warp-specialised GEMM (tests/hopper/gemm_bf16_wgmma_ws.arg): correctness on
# ragged shapes, SASS (setmaxnreg and the roles), timings next to cuBLAS and the persistent spec in
# the same run, compute-sanitizer, then variants while time is left. $1: result dir, $2: seconds.
set -uo pipefail
res=${1:-/tmp/ws-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$res"
left() { echo $(( lim - ($(date +%s) - start) )); }
ws=tests/hopper/gemm_bf16_wgmma_ws.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
summary="$res/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"

timeout 60 python3 bench/gemm_wgmma.py --no-verify --check-only --spec $ws --out "$res/ws_check" >"$res/ws_check.log" 2>&1
note "ws ragged checks: rc=$? $(grep -E '^check|checks:' "$res/ws_check.log" | tr '\n' ' ')"
timeout 60 python3 -m pytest -m cuda tests/test_hopper_ws.py -q -p no:cacheprovider >"$res/pytest_cuda.log" 2>&1
note "pytest -m cuda tests/test_hopper_ws.py: rc=$? $(tail -1 "$res/pytest_cuda.log")"

# SASS: setmaxnreg (USETMAXREG) in each role, the launch register count
if [ -f "$res/ws_check/gemm_wgmma.ptx" ]; then
    ptxas -arch=sm_90a -v "$res/ws_check/gemm_wgmma.ptx" -o "$res/ws.cubin" >"$res/ptxas.log" 2>&1
    cuobjdump -sass "$res/ws.cubin" >"$res/ws.sass" 2>&1 || nvdisasm -c "$res/ws.cubin" >"$res/ws.sass" 2>&1
    note "ptxas: $(grep -h 'registers' "$res/ptxas.log")"
    note "SASS: $(grep -c . "$res/ws.sass") lines; setmaxnreg: $(grep -iE 'SETMAXREG' "$res/ws.sass" | sed 's/^ *//' | tr -s ' ' | tr '\n' '|')"
    note "SASS counts: HGMMA $(grep -c HGMMA "$res/ws.sass"), UTMALDG $(grep -c UTMALDG "$res/ws.sass"), SYNCS $(grep -c SYNCS "$res/ws.sass")"
fi

run_bench() {  # name spec consts timed
    local name=$1 spec=$2 consts=$3 timed=$4
    [ "$(left)" -lt 25 ] && { note "$name: skipped (time)"; return; }
    timeout $(( $(left) - 5 )) python3 bench/gemm_wgmma.py --no-verify --spec "$spec" --consts "$consts" \
        --ragged 257x264x200 --timed "$timed" --reps 20 --out "$res/$name" >"$res/$name.log" 2>&1
    note "== $name ($consts) rc=$?"
    note "$(grep -E '^\||^checks' "$res/$name.log")"
}
ALL=2048x2048x2048,4096x4096x4096,8192x8192x8192,4096x14336x4096
TWO=4096x4096x4096,8192x8192x8192
run_bench ws $ws "" $ALL
run_bench persistent $pers "" $ALL
run_bench ws_bk32_s8 $ws "BK=32,SWA=2,STAGES=8" $ALL
run_bench ws_bk32_s9 $ws "BK=32,SWA=2,STAGES=9" $TWO
run_bench ws_bn128_s6 $ws "BN=128,STAGES=6" $TWO

SAN_CONSTS="BK=32,SWA=2,STAGES=8"  # the default configuration was clean in the first batch
for tool in memcheck racecheck synccheck; do
    [ "$(left)" -lt 40 ] && { note "sanitizer $tool: skipped (time)"; continue; }
    timeout 60 compute-sanitizer --tool $tool --report-api-errors no python3 bench/gemm_wgmma.py --no-verify \
        --check-only --spec $ws --consts SMS=8${SAN_CONSTS:+,$SAN_CONSTS} --ragged 150x200x328,257x264x600 --out "$res/san_$tool" >"$res/san_$tool.log" 2>&1
    note "sanitizer $tool ws ${SAN_CONSTS:-default} 150x200x328,257x264x600 SMS=8: rc=$? $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks:' "$res/san_$tool.log" | tr '\n' ' ')"
done
echo "== table"; cat "$summary"
