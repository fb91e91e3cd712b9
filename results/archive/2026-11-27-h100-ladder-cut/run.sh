# What ran on the GPU machine (one H100, 16 cores), from the project root, commit 01c247d, in calls
# of at most 10 minutes on one warm machine, after three calls that copied DALI's chunks to /tmp/dali/
# (.devcarry/, made by the project's DALI packing script; unpack.sh, env.sh carried with the last).
# First call:
bash .devcarry/unpack.sh && . .devcarry/env.sh \
  && export PIPEBENCH_GIT_COMMIT=01c247d2fe4b68d31f18158b889961439dcaf872 PYTHONUNBUFFERED=1 \
  && WAIT_S=540 bash bench/plans/on-gpu.sh reference
# Every later call (the test: that the machine is the one DALI was unpacked on; the next call found a
# fresh machine and stopped there):
test -d /tmp/site || { echo FRESH MACHINE; exit 3; }; bash bench/plans/on-gpu.sh reference
