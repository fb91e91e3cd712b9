# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh), in several calls on one warm machine. The first call records nvidia-smi, runs
# the GPU tests (results/2026-11-26-tests/run-gpu-tests.sh) and starts the reference plan's sweep in
# a process session of its own (setsid), so that it runs on between calls, uninterrupted; every call
# then waits for it to end (at most WAIT_S seconds from the call's start) and returns what it wrote.
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
mkdir -p runs
if [ ! -e runs/ladder.started ]; then
  touch runs/ladder.started
  nvidia-smi > runs/nvidia-smi.txt
  bash results/2026-11-26-tests/run-gpu-tests.sh > runs/pytest-gpu.txt 2>&1
  setsid bash -c 'python -m bench.cli sweep --config bench/plans/reference.json --out runs/ladder \
    > runs/sweep.txt 2>&1; echo $? > runs/sweep.rc' < /dev/null > /dev/null 2>&1 &
fi
while [ ! -e runs/sweep.rc ] && [ "$SECONDS" -lt "${WAIT_S:-570}" ]; do sleep 5; done
cp runs/nvidia-smi.txt runs/pytest-gpu.txt runs/sweep.txt runs/ladder/* "$OUT/" 2>/dev/null
tail -1 runs/pytest-gpu.txt; tail -c 300 runs/sweep.txt; echo; cat runs/sweep.rc 2>/dev/null || echo running
