# What ran on the GPU machine (one H100, 16 cores), from the project root, commit 2a2d33a, in calls
# of at most 10 minutes on one warm machine, after three calls that copied DALI's chunks to /tmp/dali/
# (as for ../2026-11-27-h100-photos-ladder/run.sh; runs/skphotos carried with the last).
# First call (makes a 25,000-photo set, compiles both models once, starts the sweep):
bash .devcarry/unpack.sh && . .devcarry/env.sh \
  && export PIPEBENCH_GIT_COMMIT=2a2d33ac6c13e67521a29da71b4d7d762eac007d PYTHONUNBUFFERED=1 PHOTOS=25000 \
  && WAIT_S=560 bash bench/plans/on-gpu.sh photos-epochs
# Second call, the sweep ended during it (sweep.rc 0):
. .devcarry/env.sh; CONTINUE=1 WAIT_S=300 bash bench/plans/on-gpu.sh photos-epochs
# Then, here:
pipebench report results/2026-11-27-h100-photos-epochs --out results/2026-11-27-h100-photos-epochs
