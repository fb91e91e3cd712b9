# What ran on the 2-GPU machine (nvidia-h100-x2 kind), from the project root, DALI unpacked beside it
# (.devcarry/env.sh) before the sweep: the GPU tests of the DDP steps and the harness's step
# (TESTS=1), then the multi-GPU plan (bench/plans/multi-gpu.json: every configuration on 1 and on
# 2 GPUs, --ranks 1,2). The sweep stops itself (SIGINT) after SWEEP_S seconds; the same command on
# the same warm machine (one lease) resumes it from runs/multi-gpu.
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
if [ "${TESTS:-0}" = 1 ]; then   # the 2-GPU DDP step test, the single-GPU step tests
  timeout 240 python -m pytest -q -rs -p no:cacheprovider tests/test_distributed.py::test_captured_and_compiled_ddp_steps_train_the_same_model_as_eager_ddp_on_two_gpus tests/test_step.py \
    > "$OUT/pytest-gpu.txt" 2>&1
  tail -3 "$OUT/pytest-gpu.txt"
fi
if [ "${SWEEP_S:-0}" -gt 0 ]; then
  timeout -s INT "$SWEEP_S" python -m bench.cli sweep --config bench/plans/multi-gpu.json --out runs/multi-gpu \
    > "$OUT/sweep-${CALL:-1}.txt" 2>&1
  tail -4 "$OUT/sweep-${CALL:-1}.txt"
  cp -r runs/multi-gpu "$OUT/"
fi
