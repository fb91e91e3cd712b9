# What ran on the GPU machine, in one call (then the sweep resumed in a second call with the same command).
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
python -m pytest -q -rs -p no:cacheprovider tests/test_instrument.py > "$OUT/pytest-instrument-on-gpu.txt" 2>&1
PYTHONPATH=. python results/2026-11-26-h100-instrument/cold_cache.py > "$OUT/cold-cache.txt" 2>&1
timeout -s INT "${SWEEP_S:-420}" python -m bench.cli sweep --config bench/plans/instrument.json --out runs/instrument
cp -r runs/instrument "$OUT/"
