#!/usr/bin/env bash
# Seconds to import the harness (python -X importtime, its cumulative microseconds), 3 times, in a checkout
# of each commit given, with this checkout's .venv:
#   bash results/2026-12-02-tests/import-time.sh fc3a0d3 c4794f5 > results/2026-12-02-tests/import-time.txt
set -eu
python=$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/python
repo=$(cd "$(dirname "$0")/../.." && pwd)
for commit in "$@"; do
  dir=$(mktemp -d); git -C "$repo" worktree add -q --detach "$dir" "$commit"
  for _ in 1 2 3; do
    (cd "$dir" && "$python" -X importtime -c "import bench.measuring.harness" 2>&1 |
      awk -v c="$commit" '/\| bench.measuring.harness$/ {printf "%s: import bench.measuring.harness %.2f s\n", c, $5 / 1e6}')
  done
  git -C "$repo" worktree remove --force "$dir"
done
