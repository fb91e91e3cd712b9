# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh): the reference plan (bench/plans/reference.json: the 32-px model ladder, model-only
# and e2e, 16 / 4 / 2 cores, 3 processes per cell). The sweep stops itself (SIGINT) after SWEEP_S
# seconds; the same command on the same warm machine resumes it from runs/ladder (one invocation).
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
timeout -s INT "${SWEEP_S:-300}" python -m bench.cli sweep --config bench/plans/reference.json --out runs/ladder \
  > "$OUT/sweep-${CALL:-1}.txt" 2>&1
tail -c 400 "$OUT/sweep-${CALL:-1}.txt"
cp -r runs/ladder "$OUT/"
