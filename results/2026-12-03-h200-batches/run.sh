# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, back to back on one
# warm machine, 2026-12-03 (PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree
# without .git). The lease's calls, in order:
#   1-4. DALI's chunks copied to /tmp/dali/ (.devcarry/: ../../bench/plans/on-gpu.sh's header says how they
#        are made); the first also `run.sh prepare` (runs/skphotos carried): the photo set started in the
#        background (`pipebench prepare --photos 25000`)
#   5-.  run.sh sweep      DALI unpacked; the plan bench/plans/photos-batches.json through
#                          bench/plans/on-gpu.sh, in calls of at most 10 minutes (CONTINUE=1 after the first)
#                          and, once it has ended, in the same call while it has minutes left, or in the
#                          calls after (`run.sh vit`), the plan bench/plans/photos-vit.json (its files into vit/)
# The GPU tests of this code ran in the lease before (../2026-12-02-tests/pytest-gpu-47281cb.txt).
set -u
export PYTHONUNBUFFERED=1 PHOTOS=25000
[ "$1" = prepare ] || { [ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }; . .devcarry/env.sh; }
case "$1" in
  prepare) bash bench/plans/on-gpu.sh photos-batches prepare;;
  sweep) WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh photos-batches
    if [ -e runs/photos-batches/sweep.rc ] && [ "$SECONDS" -lt 450 ]; then
      mkdir -p "$OUT/vit"; OUT=$OUT/vit CONTINUE= WAIT_S=$((570 - SECONDS)) bash bench/plans/on-gpu.sh photos-vit
    fi;;
  vit) mkdir -p "$OUT/vit"; OUT=$OUT/vit WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh photos-vit;;
esac
