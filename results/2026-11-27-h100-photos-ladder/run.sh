# What ran on the GPU machine (one H100, 16 cores), from the project root, commit b1115ea, in calls
# of at most 10 minutes on one warm machine, after three calls that copied DALI's chunks to /tmp/dali/
# (.devcarry/, made by the project's DALI packing script; unpack.sh, env.sh carried with the last,
# and runs/skphotos: scikit-image's seven photographs, made as bench/plans/on-gpu.sh's header says).
# First call (makes the 2,500-photo set, compiles both models once, starts the sweep, which ran on
# between calls; each call waited for it at most WAIT_S seconds):
bash .devcarry/unpack.sh && . .devcarry/env.sh \
  && export PIPEBENCH_GIT_COMMIT=b1115ea9ddc4ff514b0f6bf91af4dce5645a0ed3 PYTHONUNBUFFERED=1 \
  && WAIT_S=540 bash bench/plans/on-gpu.sh photos-ladder
# Second call:
. .devcarry/env.sh; CONTINUE=1 WAIT_S=580 bash bench/plans/on-gpu.sh photos-ladder
# Third call, the sweep ended during it (sweep.rc 0); then the GPU tests on the same machine
# (../2026-11-27-tests/pytest-gpu-b1115ea.txt):
. .devcarry/env.sh; CONTINUE=1 WAIT_S=330 bash bench/plans/on-gpu.sh photos-ladder
bash results/2026-11-26-tests/run-gpu-tests.sh
# Then, here:
pipebench report results/2026-11-27-h100-photos-ladder --out results/2026-11-27-h100-photos-ladder --readme-answer README.md
