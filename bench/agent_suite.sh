#!/usr/bin/env bash
# The agent suite on the GPU with the offline policy (issue 12): every task of tasks/ solved or
# reported as not expressible, then the report (per level: correct %, fast_1, geomean speed-up,
# candidates rejected before GPU time, verified-but-wrong candidates).
# Usage on the device machine: source .device-carry/on-device.sh && bash bench/agent_suite.sh $OUT [ITERATIONS]
# (needs torch and pycuda; matplotlib for the plots). One worker per visible GPU.
set -uo pipefail
out=${1:-/tmp/argus-out}
iters=${2:-6}
mkdir -p "$out"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(date -u +%FT%TZ)"
nvidia-smi -L
argus agent run tasks --out "$out/agent" --iterations "$iters" --time 900 --json > "$out/agent_summary.json" \
    2> "$out/agent_run.log"
echo "exit $?"
tail -50 "$out/agent_run.log"
argus agent report "$out/agent"
cat "$out/agent/report.md"
