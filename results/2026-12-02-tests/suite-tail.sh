#!/usr/bin/env bash
# The suite's end, before and after a change of its order: the README's test command in clones of two
# commits (the checkout's venv), alternating BEFORE AFTER BEFORE AFTER ..., each run with suite_timeline.py's
# plugin; its summary per run (its raw lines under /tmp: the tracked tree's 20 MiB hold no more), and a line
# per run (suite time, machine CPU from /proc/stat) in suite-tail-runs.txt, begun afresh. The processes the
# tests start import pipelines and bench through the checkout's editable install: the two commits must differ
# only in tests/.
#     bash results/2026-12-02-tests/suite-tail.sh BEFORE AFTER RUNS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
before=${1:?usage: suite-tail.sh BEFORE AFTER [RUNS]} after=${2:?usage: suite-tail.sh BEFORE AFTER [RUNS]} runs=${3:-2}
: > "$here/suite-tail-runs.txt"
for c in "$before" "$after"; do rm -rf "/tmp/suite-tail-$c"; git clone -q "$root" "/tmp/suite-tail-$c"; git -C "/tmp/suite-tail-$c" checkout -q "$c"; done
for i in $(seq "$runs"); do
  for c in "$before" "$after"; do
    rm -rf /tmp/timeline; cd "/tmp/suite-tail-$c"
    read -r _ u n s _ _ q sq _ < /proc/stat; cpu0=$((u + n + s + q + sq))
    TIMELINE_T0=$(date +%s.%N) PYTHONPATH="$here" "$root/.venv/bin/python" -m pytest -n auto --dist worksteal \
      -p suite_timeline -q -p no:cacheprovider > /tmp/suite-tail.out 2>&1 || true
    read -r _ u n s _ _ q sq _ < /proc/stat; cpu1=$((u + n + s + q + sq))
    raw="/tmp/suite-tail-$c-$i.txt.gz"
    cat /tmp/timeline/*.txt | gzip -9n > "$raw"
    "$root/.venv/bin/python" "$here/suite_timeline.py" "$raw" > "$here/suite-tail-$c-$i.txt"
    echo "$c run $i: $(tail -1 /tmp/suite-tail.out | tr -d '='), machine CPU $(( (cpu1 - cpu0) / $(getconf CLK_TCK) )) s, $(date -u +%F' '%H:%M) UTC" >> "$here/suite-tail-runs.txt"
  done
done
