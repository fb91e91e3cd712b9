# What ran on the GPU machine (one H100, 16 cores), from the project root, commit dcaf634, in calls
# of at most 10 minutes on one warm machine, after three calls that copied DALI's chunks to /tmp/dali/
# (.devcarry/, made by the project's DALI packing script; unpack.sh, env.sh carried with the last).
# First call (its sweep ran on between calls; each call waited for it at most WAIT_S seconds):
bash .devcarry/unpack.sh && . .devcarry/env.sh \
  && export PIPEBENCH_GIT_COMMIT=dcaf634533c77f27a46c70ceb7dfca09e063404d PYTHONUNBUFFERED=1 \
  && WAIT_S=540 bash bench/plans/on-gpu.sh reference
# Second call:
CONTINUE=1 bash bench/plans/on-gpu.sh reference
# Third call, the sweep ended during it (sweep.rc 0):
CONTINUE=1 WAIT_S=560 bash bench/plans/on-gpu.sh reference
