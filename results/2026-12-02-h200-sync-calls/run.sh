# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, 2026-12-02
# (PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree without .git). The lease's calls:
#   1-4. DALI's chunks copied to /tmp/dali/ (.devcarry/: ../../bench/plans/on-gpu.sh's header says how they are made)
#   5.   run.sh: DALI unpacked; 5,000 photographs (`pipebench prepare --photos 5000`, runs/skphotos carried);
#        python -m bench.studies.timeline at 8 cores, ResNet-50 captured in a CUDA graph (`--step graph`: no
#        compile to wait for on a fresh machine), the step alone and beside `dali`, `dali:dali_reader=file`
#        and `tvjpeg`: their threads' synchronizing calls by name (host-syncs.csv)
set -u
export PYTHONUNBUFFERED=1
[ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
. .devcarry/env.sh
python -m bench.cli prepare --photos 5000 --photos-from runs/skphotos --data-root runs/data > "$OUT/prepare.txt" 2>&1
tail -c 200 "$OUT/prepare.txt"
timeout "${LIMIT_S:-200}" python -m bench.studies.timeline --out "$OUT/timeline" --pipelines dali dali:dali_reader=file tvjpeg \
  --models torchvision:resnet50 --step graph --image-size 224 --batch-size 256 --dtype bfloat16 --cpus 8 \
  --source imagefolder:runs/data/photos-seed0 --steps 20 --warmup 10 > "$OUT/timeline-log.txt" 2>&1
echo "rc $?" >> "$OUT/timeline-log.txt"; tail -8 "$OUT/timeline-log.txt"
