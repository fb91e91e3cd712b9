# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, on one warm machine,
# in the calls of the lease of 2026-12-02 (the two runs' rows: 11:41-12:05 UTC) that ../2026-12-02-h200-null-step/run.sh names:
#   bash results/2026-12-02-h200-lanes/run.sh prepare   the photo set (25,000 photographs from runs/skphotos,
#     carried) started in the background (refused in the first call, started by hand in the second: see
#     that run.sh)
#   bash results/2026-12-02-h200-lanes/run.sh sweep     the plan (bench/plans/photos-lanes.json), in calls of
#     at most 10 minutes (CONTINUE=1 after the first)
# PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree without .git.
set -u
export PYTHONUNBUFFERED=1 PHOTOS=25000
case "$1" in
  prepare) bash bench/plans/on-gpu.sh photos-lanes prepare;;
  sweep) . .devcarry/env.sh && WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh photos-lanes;;
esac
