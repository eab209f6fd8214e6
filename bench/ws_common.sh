# Sourced by bench/ws_job.sh and bench/ws_job_ab.sh (GPU batches of the warp-specialised GEMM):
# the result dir and time limit from $1/$2, the specs, the summary with `note`, the seconds `left`,
# and the compute-sanitizer pass over the ws spec's ragged checks.
set -uo pipefail
res=${1:-/tmp/ws-out}; lim=${2:-180}; start=$(date +%s)
mkdir -p "$res"
left() { echo $(( lim - ($(date +%s) - start) )); }
ws=tests/hopper/gemm_bf16_wgmma_ws.arg
pers=tests/hopper/gemm_bf16_wgmma_persistent.arg
summary="$res/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"

# sanitize CONSTS MIN_LEFT TIMEOUT TOOL...: each tool over the ws spec's ragged checks (SMS=8, so
# that blocks loop over several tiles), while MIN_LEFT seconds remain
sanitize() {
    local consts=$1 min_left=$2 limit=$3 tool; shift 3
    for tool in "$@"; do
        [ "$(left)" -lt "$min_left" ] && { note "sanitizer $tool: skipped (time)"; continue; }
        timeout "$limit" compute-sanitizer --tool "$tool" --report-api-errors no python3 bench/gemm_wgmma.py \
            --no-verify --check-only --spec "$ws" --consts "SMS=8${consts:+,$consts}" --ragged 150x200x328,257x264x600 \
            --out "$res/san_$tool" >"$res/san_$tool.log" 2>&1
        note "sanitizer $tool ws ${consts:-default} 150x200x328,257x264x600 SMS=8: rc=$? $(grep -h -E \
            'ERROR SUMMARY|RACECHECK SUMMARY|checks:' "$res/san_$tool.log" | tr '\n' ' ')"
    done
}
