# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, back to back on
# one warm machine, after four calls that copied DALI's chunks to /tmp/dali/ (the `.devcarry/` files:
# ../../bench/plans/on-gpu.sh's header says how they are made; runs/skphotos carried with the last).
# PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree without .git. smoke.py and the
# timeline name `nvimgcodec_whole`, a knob removed after this run (whole-file decoding is now nvimgcodec's only one).
#   bash results/2026-12-02-h200-gpu-decode/run.sh first    DALI unpacked; the photo set started in the
#     background; the priority probe (priority/); each GPU decoder built and run one epoch (smoke.txt)
#   bash results/2026-12-02-h200-gpu-decode/run.sh sweep    the plan (bench/plans/photos-gpu-decode.json),
#     in calls of at most 10 minutes (CONTINUE=1 after the first)
#   bash results/2026-12-02-h200-gpu-decode/run.sh timeline the GPU timeline at 4 cores (timeline/)
#   bash results/2026-12-02-h200-gpu-decode/run.sh tests    the GPU tests of the code this run added
set -u
here=results/2026-12-02-h200-gpu-decode
[ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
. .devcarry/env.sh
export PYTHONUNBUFFERED=1 PHOTOS=25000
plan=photos-gpu-decode
case "$1" in
  first)
    bash bench/plans/on-gpu.sh $plan prepare
    nvidia-smi > "$OUT/nvidia-smi.txt"
    python -m bench.studies.priority --out "$OUT/priority" 2>&1 | tail -8
    while [ ! -e runs/$plan/prepare.rc ]; do sleep 2; done
    tail -c 300 runs/$plan/prepare.txt; echo
    python $here/smoke.py > "$OUT/smoke.txt" 2>&1; cat "$OUT/smoke.txt" | tail -30;;
  sweep)
    WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh $plan;;
  timeline)
    python -m bench.studies.timeline --out "$OUT/timeline" --pipelines dali tvjpeg nvimgcodec:nvimgcodec_whole=true \
      --models torchvision:resnet50 --step compile --image-size 224 --batch-size 256 --dtype bfloat16 --cpus 4 \
      --source imagefolder:runs/data/photos-seed0 --steps 20 --warmup 10 > "$OUT/timeline.txt" 2>&1
    tail -20 "$OUT/timeline.txt";;
  tests)
    python -m pytest -q -rs -p no:cacheprovider -m gpu tests/test_priority.py tests/test_imagefolder.py tests/test_tvjpeg.py \
      tests/test_streams.py tests/test_own_loop.py -k "nvimgcodec or priority" > "$OUT/pytest-gpu.txt" 2>&1
    tail -15 "$OUT/pytest-gpu.txt";;
esac
# A later call (the machine given back in between, a fresh one started): the producer's stages.
#   bash results/2026-12-02-h200-gpu-decode/run.sh stages
if [ "$1" = stages ]; then
  python -m bench.cli prepare --photos 12000 --photos-from runs/skphotos --data-root runs/stages > /dev/null 2>&1
  python -m bench.studies.decode_stages --out "$OUT/stages" --source imagefolder:runs/stages/photos-seed0 --pipelines tvjpeg
fi
