# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh): the photo set (once), the GPU tests of the photo paths (TESTS=1; their log at c6e9664: pytest-gpu-c6e9664.txt), then the
# photo plan (bench/plans/photos.json). The sweep stops itself (SIGINT) before the call's time limit;
# the same command on the same warm machine, resumes it from runs/photos.
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
[ -d runs/data/photos-seed0 ] || python -m bench.cli prepare --photos 2500 --photos-from runs/skphotos \
  --data-root runs/data > "$OUT/prepare.txt" 2>&1
if [ "${TESTS:-0}" = 1 ]; then
  timeout 300 python -m pytest -q -rs -p no:cacheprovider tests/test_imagefolder.py tests/test_photos.py \
    tests/test_corrupt_jpeg.py tests/test_contract.py > "$OUT/pytest-gpu.txt" 2>&1
  tail -1 "$OUT/pytest-gpu.txt"
fi
timeout -s INT "${SWEEP_S:-300}" python -m bench.cli sweep --config bench/plans/photos.json --out runs/photos \
  > "$OUT/sweep.txt" 2>&1
tail -5 "$OUT/sweep.txt"
cp -r runs/photos "$OUT/"
