# The probe at the commit before the peers were imported on demand (258aa55) and at the commit that
# ends it (6cac7a2: `Peer` and `available(among)`), one after the other on the idle 2-core development
# machine, each from its own checkout: bash results/2026-11-28-cpu-peer-imports/run.sh > results/2026-11-28-cpu-peer-imports/output.txt 2>&1
set -u
probe=$(pwd)/results/2026-11-28-cpu-peer-imports/probe.py
for commit in 258aa55 6cac7a2; do
  tree=$(mktemp -d)/tree
  git worktree add -q --detach "$tree" "$commit"
  echo "== $commit"
  (cd "$tree" && PYTHONPATH=. python "$probe" 2>&1 | grep -E "^(first|isolated|--no-isolate)")
  git worktree remove --force "$tree"
done
