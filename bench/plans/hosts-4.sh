# usage, on one nvidia-h100-x4 lease (4 x H100, 64 cores) per plan, from the project root, DALI carried
# (.devcarry/: on-gpu.sh's header says how it is made; runs/skphotos carried with it for the photo plan):
#   bash bench/plans/hosts-4.sh PLAN                the first call: data, warm compiles, the sweep started
#   CONTINUE=1 bash bench/plans/hosts-4.sh PLAN     every later call, until it prints the sweep's exit code
#   Make each later call at once: a machine idle for its release time (30 s) goes back, and the sweep
#   with it (results/archive/2026-11-27-h100x4-copies/README.md and results/2026-11-27-h100x4-photos-lost/README.md:
#   two photo sweeps lost so, the second with the next call made as soon as the first returned).
#   (PLAN: hosts-4-photos, hosts-4-32px or hosts-4-bus; PIPEBENCH_GIT_COMMIT: the tree's commit where it has
#   no .git; hosts-4-bus, the copies alone, needs no DALI and writes no prediction)
# The plan runs through on-gpu.sh, which the 10-minute calls resume; right after the sweep ends, in the
# sweep's own session and before any call copies its rows, `pipebench report --prediction-only` writes
# runs/PLAN/sweep/PREDICTION.md from the run's one-GPU rows (a pipebench without that flag: one line
# in sweep.txt says so). Each call copies at most 8 files to $OUT (what a call returns): results.csv,
# PREDICTION.md, sweep.txt, COMMAND.txt, environment.json, the plan as it ran, nvidia-smi.txt, prepare.txt.
#
# Each rank on 16 cores (64 / 4) at every rank count, 3 processes per cell, compiled steps; with
# --share-process the model-only and e2e configurations of one rank count (and the copies of one
# setting) run in one process per rank and round, so a process's start, its process group and the
# compile from inductor's cache are paid once per cell. hosts-4-photos (25,000 photographs, ResNet-50
# bf16 batch 256, 48 configuration processes) ran whole on one lease in 27 minutes of device time, three
# calls after DALI's parts (results/2026-11-28-h100x4-photos/README.md): 6 minutes before the sweep (DALI
# unpacked, the photo set on a forked process per core in 16 s, the warm compiles) and 19 for the sweep.
# hosts-4-32px (resnet9-w0.25 and vit-s4: a fast and a slow rung) ran whole on a lease of its own in
# 23 minutes of device time, three calls after DALI's parts (results/2026-11-28-h100x4-32px/README.md):
# 4 minutes before the sweep and 16 for it (estimated at 17 from the 32-px processes of
# results/2026-11-26-h100x2-multi-gpu-2). The copies (hosts-4-bus: every GPU copying at once,
# pinned and pageable, uint8 and float32, 32 and 224 px) left it for a plan of their own: a copy process
# took 69 s there (3 windows of 1 s per copy; hosts-4-bus times 2 of 0.5 s), so up to 10 more minutes
# at 3 processes, past one lease's GPU time with the rest; hosts-4-bus runs 4, which balance its 4
# members' order: up to 14 minutes. It ran whole in its first call, the sweep in about 6 minutes of a
# 6.3-minute call (results/2026-11-28-h100x4-bus/README.md).
# (How: medians of the gaps between the last rank-0 rows of consecutive configuration processes in
# that run's results.csv, which ran one process at a time.)
set -u
plan=${1:?"usage: bash bench/plans/hosts-4.sh hosts-4-photos|hosts-4-32px|hosts-4-bus [predict]"}
runs=runs/$plan
case "$plan" in hosts-4-photos|hosts-4-32px|hosts-4-bus) ;;
  *) echo "hosts-4.sh: no plan $plan (hosts-4-photos, hosts-4-32px or hosts-4-bus)" >&2; exit 2;; esac
if [ "${2:-}" = predict ]; then   # run by on-gpu.sh (AFTER) in the sweep's session, right after the sweep
  if python -m bench.cli report --help 2> /dev/null | grep -q -- --prediction-only; then
    python -m bench.cli report "$runs/sweep" --out "$runs/sweep" --prediction-only
  else
    echo "hosts-4.sh: this pipebench's report has no --prediction-only: no PREDICTION.md was written"
  fi
  exit 0
fi
if grep -q '"dali' "bench/plans/$plan.json"; then
  [ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
  . .devcarry/env.sh
fi
export PYTHONUNBUFFERED=1 PHOTOS=25000
grep -q '"e2e"' "bench/plans/$plan.json" && export AFTER="bash bench/plans/hosts-4.sh $plan predict"
mkdir -p "$runs/calls"
out=$OUT
OUT=$runs/calls WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh "$plan"
code=$?
cp "$runs/sweep/results.csv" "$runs/sweep/PREDICTION.md" "$runs/sweep.txt" "$runs/sweep/COMMAND.txt" \
  "$runs/sweep/environment.json" "$runs/sweep/$plan.json" "$runs/nvidia-smi.txt" "$runs/prepare.txt" "$out/" 2> /dev/null
exit $code
