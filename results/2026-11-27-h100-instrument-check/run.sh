# What ran on the GPU machine, from the project root, on one nvidia-h100-x1 lease (DALI 2.4 unpacked
# beside the checkout, .devcarry/env.sh sourced), back to back on the same warm machine:
#   bash results/2026-11-27-h100-instrument-check/run.sh   (the GPU tests and the stand-in check; its logs are
#     results/2026-11-27-tests/pytest-gpu-e303d5b.txt and pytest-gpu-dali-e303d5b.txt, the stand-in's output
#     results/2026-11-27-h100-busy-standin/)
#   WAIT_S=540 bash bench/plans/on-gpu.sh instrument-check   (the plan; it ended within that one call)
# PIPEBENCH_GIT_COMMIT=e303d5b97806a10cb72778c372b997b42684af3f: the machine gets a copy of the tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
python -m pytest -q -rs -p no:cacheprovider -m gpu > "$OUT/pytest-gpu.txt" 2>&1; tail -1 "$OUT/pytest-gpu.txt"
# the DALI source across epochs and the queue capacities, on the GPU (they run on the CPU in the suite too)
python -m pytest -q -rs -p no:cacheprovider tests/test_dali_epochs.py tests/test_contract.py -k "dali or capacity" \
  > "$OUT/pytest-gpu-dali.txt" 2>&1; tail -1 "$OUT/pytest-gpu-dali.txt"
python -m bench.standin --out "$OUT/standin" > "$OUT/standin.txt" 2>&1; tail -1 "$OUT/standin.txt"
