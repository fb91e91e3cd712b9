# What ran on the GPU machine, from the project root, on one nvidia-h100-x1 lease (DALI 2.4 unpacked
# beside the checkout, .devcarry/env.sh sourced), back to back on the same warm machine:
#   PART=tests bash results/2026-11-27-h100-instrument-check/run.sh   (the GPU tests and the stand-in check)
#   bash bench/plans/on-gpu.sh instrument-check                       (the plan; CONTINUE=1 ... until it ends)
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
python -m pytest -q -rs -p no:cacheprovider -m gpu > "$OUT/pytest-gpu.txt" 2>&1; tail -1 "$OUT/pytest-gpu.txt"
# the DALI source across epochs and the queue capacities, on the GPU (they run on the CPU in the suite too)
python -m pytest -q -rs -p no:cacheprovider tests/test_dali_epochs.py tests/test_contract.py -k "dali or capacity" \
  > "$OUT/pytest-gpu-dali.txt" 2>&1; tail -1 "$OUT/pytest-gpu-dali.txt"
python -m bench.standin --out "$OUT/standin" > "$OUT/standin.txt" 2>&1; tail -1 "$OUT/standin.txt"
