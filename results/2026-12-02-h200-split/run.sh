# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, back to back on one
# warm machine, 2026-12-02 (PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree
# without .git). The lease's calls, in order:
#   1-4. DALI's chunks copied to /tmp/dali/ (.devcarry/: ../../bench/plans/on-gpu.sh's header says how they
#        are made); the first also `run.sh prepare` (runs/skphotos carried): the photo set started in the
#        background (`pipebench prepare --photos 25000`)
#   5.   run.sh tests      DALI unpacked, the GPU tests of this commit (../2026-12-02-tests/gpu.sh)
#   6-.  run.sh sweep      the plan bench/plans/photos-split.json through bench/plans/on-gpu.sh, in calls of
#                          at most 10 minutes (CONTINUE=1 after the first)
set -u
export PYTHONUNBUFFERED=1 PHOTOS=25000
[ "$1" = prepare ] || { [ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }; . .devcarry/env.sh; }
case "$1" in
  prepare) bash bench/plans/on-gpu.sh photos-split prepare;;
  tests) bash results/2026-12-02-tests/gpu.sh;;
  sweep) WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh photos-split;;
esac
