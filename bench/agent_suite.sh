#!/usr/bin/env bash
# The agent suite on the GPU with the offline policy (issue 12): every task of tasks/ solved or
# reported as not expressible, then the report (per level: correct %, fast_1, geomean speed-up,
# candidates rejected before GPU time and the GPU time that saved, verified-but-wrong candidates).
#
# Usage on the device machine: bash bench/agent_suite.sh OUT [BUDGET_S] [ITERATIONS] [RESUME_TGZ]
#   BUDGET_S    wall-clock seconds this call may take in all (default 140): the runs get a deadline
#               inside it (no new candidate after it), a hard `timeout` behind that, and the rest is
#               the report and the archive
#   ITERATIONS  candidates per task in the second pass (default 4); the first pass gives every task
#               one candidate (the template's default configuration), breadth first
#   RESUME_TGZ  a run directory archived by an earlier call (OUT/agent_run.tar.gz): it is unpacked
#               and resumed, nothing lost (default bench/agent_resume/agent_run.tar.gz when present)
# Writes OUT/agent_run.tar.gz (the whole run directory: ship it back for the next call), OUT/report.md,
# OUT/summary.json, OUT/agent_run.log and OUT/candidates.tsv (one line per evaluated candidate).
# Verification runs on the CPU cores in parallel (--cpu-workers), GPU work one candidate at a time.
set -uo pipefail
out=${1:-/tmp/argus-out}
budget=${2:-140}
iters=${3:-4}
resume=${4:-bench/agent_resume/agent_run.tar.gz}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
work=$(mktemp -d /tmp/argus-agent-XXXX)
run="$work/agent_run"
cores=$(nproc)
# the GPU-phase processes compute the float64 reference with torch on the CPU: a few threads each,
# so they do not fight the verification processes (and anything else on the cores) for every core
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
jobs=$(( cores > 4 ? cores - 2 : 2 ))
commit=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')  # COMMIT: a snapshot's
echo "== commit $commit $(date -u +%FT%TZ) cores $cores budget ${budget}s"
timeout 20 nvidia-smi -L
common=(--jobs "$jobs" --cpu-workers $(( cores > 2 ? cores - 1 : 1 )) --candidate-timeout 60 --time 900)
# pass 1: one candidate per task (the template's default configuration), breadth first, so every
# task gets its first GPU check before any task gets its second
d=$(( $(left) - 35 ))
if [ -f "$resume" ]; then
    tar -xzf "$resume" -C "$work"
    echo "== resumed from $resume: $(ls "$run"/*/run.json | wc -l) run directories"
    echo "== pass 1 (resumed): one candidate per task, deadline ${d}s"
    timeout -k 5 $(( d + 22 )) python3 -m argus_verify agent resume "$run" --iterations 1 --deadline "$d" \
        "${common[@]}" >> "$out/agent_run.log" 2>&1
else
    echo "== pass 1: one candidate per task, deadline ${d}s"
    timeout -k 5 $(( d + 22 )) python3 -m argus_verify agent run tasks --out "$run" --iterations 1 --deadline "$d" \
        "${common[@]}" >> "$out/agent_run.log" 2>&1
fi
echo "exit $?"
d=$(( $(left) - 35 ))
if [ "$d" -gt 10 ]; then
    echo "== pass 2: up to $iters candidates per task, deadline ${d}s"
    timeout -k 5 $(( d + 22 )) python3 -m argus_verify agent resume "$run" --iterations "$iters" --deadline "$d" \
        "${common[@]}" >> "$out/agent_run.log" 2>&1
    echo "exit $?"
fi
tar -czf "$out/agent_run.tar.gz" -C "$work" agent_run  # first: the run directory is what matters
# the Markdown only (plots take ~20 s: `argus agent report RUN` makes them from the archive later)
timeout 15 python3 -m argus_verify agent report "$run" --no-plots >> "$out/agent_run.log" 2>&1
cp "$run/report.md" "$out/report.md" 2>/dev/null
cp "$run/summary.json" "$out/summary.json" 2>/dev/null
# one line per evaluated candidate: task, id, verdict, verify seconds (CPU), GPU seconds, speed-up
python3 - "$run" > "$out/candidates.tsv" <<'EOF'
import json, sys
from pathlib import Path
for d in sorted(Path(sys.argv[1]).iterdir()):
    ev = d / "events.jsonl"
    if not ev.exists():
        continue
    for line in ev.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("kind") != "result":
            continue
        r = e["result"]
        b = r.get("bench") or {}
        print(d.name, e["id"], r.get("verdict"), r.get("verify_seconds"), r.get("gpu_seconds"),
              r.get("wall_seconds"), b.get("ours_ms"), b.get("eager_ms"), b.get("speedup"), sep="\t")
EOF
echo "== $(wc -l < "$out/candidates.tsv") candidates evaluated, $(( $(date +%s) - start ))s"
sed -n '/## Per level/,$p' "$run/report.md" 2>/dev/null | head -20
