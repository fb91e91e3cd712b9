# The 224-px ladder (photos-ladder.json) on a GPU machine reached in calls of at most 10 minutes (one
# H100, 16 cores): the same command in every call, from the project root, on one warm machine, DALI
# importable (.devcarry/env.sh where it is carried), scikit-image's photographs in runs/skphotos (a
# machine without a package index). The first call records nvidia-smi, makes the photo set, compiles
# each model's step once, both at once, into inductor's cache (runs/warm-*: not part of the run),
# then starts the sweep in a process session of its own (setsid), so that it runs on between calls,
# uninterrupted. Every call waits for it to end (at most WAIT_S seconds from the call's start) and
# copies what it wrote to $OUT. PIPEBENCH_GIT_COMMIT: where the tree has no .git.
# runs/skphotos, made where pip works (pip install -e '.[photos]'), then carried:
#   python -c "import shutil, skimage, pathlib; from pipelines.sources.photos import CATALOG; \
#     d = pathlib.Path('runs/skphotos'); d.mkdir(parents=True, exist_ok=True); \
#     [shutil.copy(pathlib.Path(skimage.data_dir) / p.file, d) for p in CATALOG]"
set -u
mkdir -p runs
if [ ! -e runs/photos-ladder.started ]; then
  touch runs/photos-ladder.started
  nvidia-smi > runs/nvidia-smi.txt
  python -m bench.cli prepare --photos 2500 --photos-from runs/skphotos --data-root runs/data > runs/prepare.txt 2>&1
  for m in torchvision:resnet50 torchvision:vit_b_16; do
    python -m bench.cli sweep --modes model --models "$m" --step compile --batch-size 256 --dtype bfloat16 \
      --image-size 224 --source imagefolder:runs/data/photos-seed0 --processes 1 --steps 1 --warmup 0 \
      --out "runs/warm-${m#torchvision:}" > "runs/warm-${m#torchvision:}.txt" 2>&1 &
  done
  wait
  setsid bash -c 'python -m bench.cli sweep --config bench/plans/photos-ladder.json --out runs/photos-ladder \
    > runs/sweep.txt 2>&1; echo $? > runs/sweep.rc' < /dev/null > /dev/null 2>&1 &
fi
while [ ! -e runs/sweep.rc ] && [ "$SECONDS" -lt "${WAIT_S:-570}" ]; do sleep 5; done
cp runs/nvidia-smi.txt runs/prepare.txt runs/sweep.txt runs/photos-ladder/* "$OUT/" 2>/dev/null
tail -c 300 runs/prepare.txt; echo; tail -c 300 runs/sweep.txt; echo; cat runs/sweep.rc 2>/dev/null || echo running
