#!/usr/bin/env bash
# Seconds (wall, /usr/bin/time) from start to exit of `python -m bench.cli ARGS` for a bad value of each
# kind of type, 3 times each, in a checkout of each commit given, with this checkout's .venv:
#   bash results/2026-12-02-tests/usage-error-time.sh f83fa15 HEAD > results/2026-12-02-tests/usage-error-time.txt
set -eu
python=$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/python
repo=$(cd "$(dirname "$0")/../.." && pwd)
echo "# $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for commit in "$@"; do
  sha=$(git -C "$repo" rev-parse --short "$commit")
  dir=$(mktemp -d); git -C "$repo" worktree add -q --detach "$dir" "$commit"
  for args in "compare --steps -3" "sweep --pipelines nosuch" "compare --dali-cpu-share 2" "sweep --part 3/2" \
              "compare --source bogus" "prepare --jpeg-quality 0"; do
    for _ in 1 2 3; do
      (cd "$dir" && /usr/bin/time -f "%e %x" "$python" -m bench.cli $args 2>&1 >/dev/null | tail -1 |
        awk -v c="$sha" -v a="$args" '{printf "%s: pipebench %s: %.2f s (exit %s)\n", c, a, $1, $2}')
    done
  done
  git -C "$repo" worktree remove --force "$dir"
done
