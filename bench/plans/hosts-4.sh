# usage, on one nvidia-h100-x4 lease (4 x H100, 64 cores) per plan, from the project root, DALI carried
# (.devcarry/: on-gpu.sh's header says how it is made; runs/skphotos carried with it for the photo plan):
#   bash bench/plans/hosts-4.sh PLAN                the first call: data, warm compiles, the sweep started
#   CONTINUE=1 bash bench/plans/hosts-4.sh PLAN     every later call, until it prints the sweep's exit code
#   Make each later call at once: a machine idle for its release time (30 s) goes back, and the sweep
#   with it (results/2026-11-27-h100x4-copies/README.md: a photo sweep lost so).
#   (PLAN: hosts-4-photos or hosts-4-32px; PIPEBENCH_GIT_COMMIT: the tree's commit where it has no .git)
# The plan runs through on-gpu.sh, which the 10-minute calls resume; right after the sweep ends, in the
# sweep's own session and before any call copies its rows, `pipebench report --prediction-only` writes
# runs/PLAN/sweep/PREDICTION.md from the run's one-GPU rows (a pipebench without that flag: one line
# in sweep.txt says so). Each call copies at most 8 files to $OUT (what a call returns): results.csv,
# PREDICTION.md, sweep.txt, COMMAND.txt, environment.json, the plan as it ran, nvidia-smi.txt, prepare.txt.
#
# Each rank on 16 cores (64 / 4), 3 processes per cell, 2 windows each; model-only and e2e of one cell
# share a process at 1 rank (--share-process; plan.py runs each DDP configuration in processes of its
# own), compiled steps. Both plans' sweeps are estimated at about 14 minutes or less (the lease also
# needs ~3 minutes for DALI's unpacking, the photo set and the warm compiles, which on-gpu.sh now runs at
# every rank count, so the sweep's first DDP processes find their compiled graphs in inductor's cache):
#   hosts-4-photos (25,000 photographs, ResNet-50 bf16 batch 256; 36 configuration processes):
#     per round of processes: the 1-rank cell of 4 members (model-only, dataloader, dali with each decoder)
#     108 s (photos-best's rows: a cell's first member 58 s with its start and compile, then model-only
#     17 s, dali GPU decoder 20 s, CPU decoder 13 s, dataloader 33 s at 16 cores); loader-only of the 3 at
#     1 rank 43 s (multi-gpu-2's loader processes 10-16 s); 4 ranks: model-only 21 s and e2e 25 + 22 + 21 s
#     (multi-gpu-2's 2-rank e2e processes, 14-20 s, less their windows, + 2 s for 4 ranks' start + 4 s for
#     ResNet-50's compile from cache, + 2 windows of one epoch per rank at the 1-GPU rates of photos-best)
#     = 240 s; 3 rounds 720 s, + copies at 224 px (4 per rank count, multi-gpu-2's 7-11 s each) 108 s:
#     ~830 s, 13.8 min. At 2 ranks too (cut) it would be ~1,120 s, 18.7 min.
#   hosts-4-32px (resnet9-w0.25, 57 configuration processes): per round the 1-rank cell of 5 members 46 s
#     (multi-gpu-2's model-only and e2e processes, 11-18 s, less each later member's start and compile
#     ~3 s and 1.3 s of shorter windows), loader-only of the 4 at 1 rank 41 s, 2 ranks 68 s, 4 ranks 78 s
#     (multi-gpu-2's 2-rank processes, 13-19 s, + 2 s each) = 233 s; 3 rounds 700 s, + copies at 32 px
#     96 s: ~800 s, 13.3 min. A slow rung (vit-s4, model-only 23k img/s) beside it at 1, 2 and 4 ranks
#     (cut) would add ~670 s: ~1,470 s, 24.5 min.
# (How: each committed run's per-process durations are the gaps between the row timestamps of
# consecutive configuration processes, rank 0's rows; results/2026-11-27-h100-photos-best/results.csv
# and results/2026-11-26-h100x2-multi-gpu-2/results.csv.)
set -u
plan=${1:?"usage: bash bench/plans/hosts-4.sh hosts-4-photos|hosts-4-32px [predict]"}
runs=runs/$plan
case "$plan" in hosts-4-photos|hosts-4-32px) ;; *) echo "hosts-4.sh: no plan $plan (hosts-4-photos or hosts-4-32px)" >&2; exit 2;; esac
if [ "${2:-}" = predict ]; then   # run by on-gpu.sh (AFTER) in the sweep's session, right after the sweep
  if python -m bench.cli report --help 2> /dev/null | grep -q -- --prediction-only; then
    python -m bench.cli report "$runs/sweep" --out "$runs/sweep" --prediction-only
  else
    echo "hosts-4.sh: this pipebench's report has no --prediction-only: no PREDICTION.md was written"
  fi
  exit 0
fi
[ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
. .devcarry/env.sh
export PYTHONUNBUFFERED=1 PHOTOS=25000 AFTER="bash bench/plans/hosts-4.sh $plan predict"
mkdir -p "$runs/calls"
out=$OUT
OUT=$runs/calls WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh "$plan"
code=$?
cp "$runs/sweep/results.csv" "$runs/sweep/PREDICTION.md" "$runs/sweep.txt" "$runs/sweep/COMMAND.txt" \
  "$runs/sweep/environment.json" "$runs/sweep/$plan.json" "$runs/nvidia-smi.txt" "$runs/prepare.txt" "$out/" 2> /dev/null
exit $code
