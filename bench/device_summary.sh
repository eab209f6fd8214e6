# Sourced by the one-call device scripts (bench/gpu_*.sh) with the output folder as $1: sets $out and
# $summary, defines note() (a line on stdout and in the summary) and starts the summary with the
# commit, the time and the GPU.
out=${1:-/tmp/argus-out}
mkdir -p "$out"
summary="$out/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$summary"
