# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh): the photo set (once), then bench/plans/photos-dali.json, stopped by SIGINT
# before the call's limit. PIPEBENCH_GIT_COMMIT: the machine gets a copy of the tree without .git.
nvidia-smi > "$OUT/nvidia-smi.txt"
[ -d runs/data/photos-seed0 ] || python -m bench.cli prepare --photos 2500 --photos-from runs/skphotos \
  --data-root runs/data > "$OUT/prepare.txt" 2>&1
timeout -s INT "${SWEEP_S:-300}" python -m bench.cli sweep --config bench/plans/photos-dali.json --out runs/photos-dali \
  > "$OUT/sweep.txt" 2>&1
tail -5 "$OUT/sweep.txt"
cp -r runs/photos-dali "$OUT/"
