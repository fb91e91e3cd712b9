# What ran on the GPU machine (one H100, 16 cores), from the project root, commit bfe52a5, in one
# call of at most 10 minutes, after three calls that copied DALI's chunks to /tmp/dali/ (as for
# ../2026-11-27-h100-photos-ladder/run.sh; runs/skphotos carried with this one). It made a
# 25,000-photo set, compiled the model once, ran the sweep and waited for it (sweep.rc 0):
bash .devcarry/unpack.sh && . .devcarry/env.sh \
  && export PIPEBENCH_GIT_COMMIT=bfe52a5f779381f007edcaa9a99aef0071f5dba5 PYTHONUNBUFFERED=1 PHOTOS=25000 \
  && WAIT_S=570 bash bench/plans/on-gpu.sh photos-epochs
# Then, here:
pipebench report results/2026-11-27-h100-photos-epochs-2 --out results/2026-11-27-h100-photos-epochs-2
