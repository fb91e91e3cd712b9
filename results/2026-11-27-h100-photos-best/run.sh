# What ran on the GPU machine (one nvidia-h100-x1 lease, 16 cores), from the project root, back to
# back on one warm machine, after three calls that copied DALI's chunks to /tmp/dali/ (the
# `.devcarry/` files: ../../bench/plans/on-gpu.sh's header says how they are made; runs/skphotos and
# the FFCV bundle carried with them). PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy
# of the tree without .git.
#   bash results/2026-11-27-h100-photos-best/run.sh smoke   the new GPU paths' tests, while the photo set is made
#     (log: ../2026-11-27-tests/pytest-gpu-smoke-7162126.txt)
#   bash results/2026-11-27-h100-photos-best/run.sh sweep   the plan, in three calls of at most 10 minutes
#     (CONTINUE=1 after the first; the third, WAIT_S=200, found it ended; sweep.txt is the second call's
#     copy, cut at 52 of 60 windows; results.csv the third's, whole)
#   bash results/2026-11-27-h100-photos-best/run.sh after   the GPU timeline, then the GPU tests: in that
#     same third call, which reached the session's GPU time limit (395 s) during the tests. The timeline
#     ran, but its files did not come back (a call returns at most 8 files, and that call also copied the
#     sweep's; `--traces` is now off by default), and the test log holds only its progress line
#     (../2026-11-27-tests/pytest-gpu-7162126-cut.txt). Both ran again on a later lease of the same kind
#     (a fresh machine, after the three DALI calls), at the commit their files name, in two calls:
#   bash results/2026-11-27-h100-photos-best/run.sh timeline   the photo set made again, then the timeline
#     (`after`'s, with DALI's hardware-decoder share 0.99 added): timeline/
#   bash results/2026-11-27-h100-photos-best/run.sh tests      every GPU test: ../2026-11-27-tests/
set -u
here=results/2026-11-27-h100-photos-best
[ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
. .devcarry/env.sh
[ -e .devcarry/ffcv-env.sh ] && . .devcarry/ffcv-env.sh
export PYTHONUNBUFFERED=1 PHOTOS=25000
case "$1" in
  smoke)
    bash bench/plans/on-gpu.sh photos-best prepare
    nvidia-smi > "$OUT/nvidia-smi.txt"
    python -m pytest -q -rs -p no:cacheprovider -m gpu tests/test_dali_photos.py tests/test_imagefolder.py \
      tests/test_tvjpeg.py tests/test_streams.py tests/test_timeline.py tests/test_ffcv.py > "$OUT/pytest-gpu-smoke.txt" 2>&1
    tail -5 "$OUT/pytest-gpu-smoke.txt"
    while [ ! -e runs/photos-best/prepare.rc ]; do sleep 2; done
    tail -c 400 runs/photos-best/prepare.txt;;
  sweep)
    WAIT_S=570 bash bench/plans/on-gpu.sh photos-best;;
  timeline)
    python -m bench.cli prepare --photos "$PHOTOS" --photos-from runs/skphotos --data-root runs/data > "$OUT/prepare.txt" 2>&1
    tail -2 "$OUT/prepare.txt"; nvidia-smi > "$OUT/nvidia-smi.txt"; bash "$0" after-timeline;;
  tests)
    python -m pytest -q -rs -p no:cacheprovider -m gpu > "$OUT/pytest-gpu.txt" 2>&1; tail -3 "$OUT/pytest-gpu.txt";;
  after|after-timeline)
    python -m bench.timeline --out "$OUT/timeline" --pipelines dali dali:dali_hw_decoder_load=0.99 dali:dali_decoder=cpu \
      --models torchvision:resnet50 --step compile --image-size 224 --batch-size 256 --dtype bfloat16 --cpus 16 \
      --source imagefolder:runs/data/photos-seed0 --steps 20 --warmup 10 > "$OUT/timeline.txt" 2>&1
    tail -3 "$OUT/timeline.txt"
    [ "$1" = after-timeline ] && exit 0
    python -m pytest -q -rs -p no:cacheprovider -m gpu > "$OUT/pytest-gpu.txt" 2>&1; tail -3 "$OUT/pytest-gpu.txt";;
esac
