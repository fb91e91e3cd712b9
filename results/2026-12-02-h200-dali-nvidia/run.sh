# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, back to back on one
# warm machine, 2026-12-02 (PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree
# without .git). The lease's calls, in order:
#   1-4. DALI's chunks copied to /tmp/dali/ (.devcarry/: ../../bench/plans/on-gpu.sh's header says how they
#        are made); the first also `run.sh prepare` (runs/skphotos carried): the photo set started in the
#        background (`pipebench prepare --photos 25000`)
#   5.   run.sh tests      DALI unpacked, the GPU tests of this commit (../2026-12-02-tests/gpu.sh)
#   6-7. run.sh sweep      the plan bench/plans/photos-nvidia.json through bench/plans/on-gpu.sh, in calls of
#                          at most 10 minutes (CONTINUE=1 after the first)
#   8.   run.sh timeline   python -m bench.studies.timeline at 8 cores: the step alone and beside `dali`,
#                          `dali` as NVIDIA's example, `tvjpeg` (its trace's host calls and GPU queues too); its
#                          timeout was cut from 560 to 400 s by the call itself (sed, on the machine) to fit the
#                          device time left; the timeline took 126 s
set -u
export PYTHONUNBUFFERED=1 PHOTOS=25000
[ "$1" = prepare ] || { [ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }; . .devcarry/env.sh; }
case "$1" in
  prepare) bash bench/plans/on-gpu.sh photos-nvidia prepare;;
  tests) bash results/2026-12-02-tests/gpu.sh;;
  sweep) WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh photos-nvidia;;
  timeline) while [ ! -e runs/photos-nvidia/prepare.rc ]; do sleep 2; done
    timeout 400 python -m bench.studies.timeline --out "$OUT/timeline" --pipelines dali dali:dali_reader=file tvjpeg \
      --models torchvision:resnet50 --step compile --image-size 224 --batch-size 256 --dtype bfloat16 --cpus 8 \
      --source imagefolder:runs/data/photos-seed0 --steps 20 --warmup 10 \
      > "$OUT/timeline-log.txt" 2>&1; echo "rc $?" >> "$OUT/timeline-log.txt"; tail -12 "$OUT/timeline-log.txt";;
esac
