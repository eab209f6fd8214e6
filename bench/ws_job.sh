#!/usr/bin/env bash
# GPU batch for the warp-specialised GEMM (tests/hopper/gemm_bf16_wgmma_ws.arg): correctness on
# ragged shapes, SASS (setmaxnreg and the roles), timings next to cuBLAS and the persistent spec in
# the same run, compute-sanitizer, then variants while time is left. $1: result dir, $2: seconds.
source "$(dirname "$0")/ws_common.sh"  # $1, $2, left, note, ws, pers, sanitize

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

# BK=32, 8 stages: the default configuration was clean in the first batch
sanitize "BK=32,SWA=2,STAGES=8" 40 60 memcheck racecheck synccheck
echo "== table"; cat "$summary"
