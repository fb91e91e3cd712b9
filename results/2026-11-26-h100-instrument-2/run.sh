# What ran on the GPU machine: the GPU tests and the instrument plan (bench/plans/instrument.json).
# The sweep stops itself (SIGINT) before the call's time limit; the same command on the same warm
# machine, with TESTS=0, resumes it from runs/instrument (finished configurations are kept).
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
if [ "${TESTS:-1}" = 1 ]; then
  python -m pytest -q -rs -p no:cacheprovider tests/test_instrument.py tests/test_streams.py tests/test_step.py \
    tests/test_interrupts.py \
    "tests/test_contract.py::test_crop_normalize_is_the_padded_crop_mirrored_then_normalized" \
    "tests/test_contract.py::test_compiling_the_kernel_starts_no_compile_worker_process" > "$OUT/pytest-gpu.txt" 2>&1
  tail -1 "$OUT/pytest-gpu.txt"
fi
timeout -s INT "${SWEEP_S:-420}" python -m bench.cli sweep --config bench/plans/instrument.json --out runs/instrument
cp -r runs/instrument "$OUT/"
