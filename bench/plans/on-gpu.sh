# usage: bash bench/plans/on-gpu.sh PLAN, then CONTINUE=1 bash bench/plans/on-gpu.sh PLAN until it ends
#   (`bash bench/plans/on-gpu.sh PLAN prepare` first, optionally: starts the photo set in the background
#   and returns, so that a call can do other work while it is made; the plan's first call then waits for it)
#   (PLAN: reference, photos-ladder, ...: bench/plans/PLAN.json)
# A plan on a GPU machine reached in calls of at most 10 minutes, one call after another,
# from the project root, on one warm machine, DALI importable (.devcarry/env.sh where it is carried),
# FFCV too where the plan times it (.devcarry/ffcv-env.sh: bench/plans/ffcv-for-device.sh).
# The first call records nvidia-smi and the cores (cpu.txt), makes the plan's data (for a photo plan the photo set, from
# runs/skphotos: see below), compiles every model of the plan's compiled grids (of a part, of its cells) once, all at once,
# into inductor's cache (runs/PLAN/warm: not part of the run; the seconds these took: before.txt, packed with the
# rows; compilation is outside every window
# anyway, and this spares the sweep's first processes their cold compile; the compiled grids alone,
# model-only, at each of their --ranks, so a DDP step is compiled too, each rank on the cores the
# most ranks listed leave it), then starts the sweep in
# a process session of its own (setsid), so that it runs on between calls, uninterrupted. Every call
# waits for it to end (at most WAIT_S seconds from the call's start) and packs what it has written so
# far (the rows of the cells done, should the machine be taken back before the next call) into one
# file, $OUT/PLAN[-partKofN].tar: the device tool brings back at most 8 files, and a sweep folder and
# its logs hold more (a lease on 2026-12-03 lost a part's rows that way). PIPEBENCH_GIT_COMMIT: where the tree has no .git. PHOTOS: the photo set's size (2500 by default).
# PART: K/N, the plan's part K of N (`sweep --part`: whole cells, each part a lease of its own), run in
# runs/PLAN-partKofN.
# AFTER: a command the sweep's session runs right after the sweep ends, before sweep.rc is written
# (so before any call copies the rows), its output appended to sweep.txt. The next part of a plan, in the
# same lease without a call between: AFTER='AFTER= WAIT_S=0 OUT=/tmp PART=5/7 bash bench/plans/on-gpu.sh ladder'
# (it starts part 5's sweep as part 4's ends; a later call, CONTINUE=1 PART=5/7, waits for it and packs it).
# runs/skphotos, made where pip works (pip install -e '.[photos]'), then carried:
#   python -c "import shutil, skimage, pathlib; from pipelines.sources.photos import CATALOG; \
#     d = pathlib.Path('runs/skphotos'); d.mkdir(parents=True, exist_ok=True); \
#     [shutil.copy(pathlib.Path(skimage.data_dir) / p.file, d) for p in CATALOG]"
# Every call after the first: CONTINUE=1, so that a call that finds a fresh machine (the earlier one
# went back, its sweep with it) says so instead of starting the plan again unnoticed.
set -u
plan=bench/plans/$1.json
part=${PART:-}
runs=runs/$1${part:+-part${part%/*}of${part#*/}}
if [ ! -e "$runs/started" ] && [ -n "${CONTINUE:-}" ]; then
  echo "on-gpu.sh: this machine has no sweep of $1: the earlier machine went back, and its sweep with it" >&2; exit 3
fi
mkdir -p "$runs/warm"
if [ "${2:-}" = prepare ]; then   # only start making the photo set, in the background, and return
  touch "$runs/prepare.started"
  setsid bash -c "python -m bench.cli prepare --photos ${PHOTOS:-2500} --photos-from runs/skphotos --data-root runs/data \
    > $runs/prepare.txt 2>&1; echo \$? > $runs/prepare.rc" < /dev/null > /dev/null 2>&1 &
  exit 0
fi
if [ ! -e "$runs/started" ] && grep -q '"dali' "$plan" && ! python -c "import nvidia.dali" 2> /dev/null; then
  echo "on-gpu.sh: $plan times DALI, which this Python cannot import (source .devcarry/env.sh first?)" >&2; exit 3
fi
if [ ! -e "$runs/started" ] && grep -q '"ffcv"' "$plan" && ! python -c "import ffcv" 2> /dev/null; then
  echo "on-gpu.sh: $plan times FFCV, which this Python cannot import (source .devcarry/ffcv-env.sh first?)" >&2; exit 3
fi
if [ ! -e "$runs/started" ]; then
  touch "$runs/started"
  nvidia-smi > "$runs/nvidia-smi.txt"
  # the cores lent (the same model name decodes at different rates on different machines: their topology)
  # and /proc/stat's cpu line (its 8th number: time stolen by the host), again as the sweep ends
  { lscpu 2> /dev/null; grep "^cpu " /proc/stat; } > "$runs/cpu.txt"
  if [ -e "$runs/prepare.started" ]; then   # `on-gpu.sh PLAN prepare` started the data in an earlier call
    while [ ! -e "$runs/prepare.rc" ]; do sleep 2; done
  elif grep -q '"imagefolder:runs/data/photos-seed0"' "$plan"; then
    python -m bench.cli prepare --photos "${PHOTOS:-2500}" --photos-from runs/skphotos --data-root runs/data > "$runs/prepare.txt" 2>&1
  else
    python -c "from pipelines import PipelineConfig; from pipelines.sources.split import resolve_folder; \
print('data:', *resolve_folder(PipelineConfig()))" > "$runs/prepare.txt" 2>&1   # the synthetic set, once
  fi
  echo "the checks, the data and nvidia-smi: $SECONDS s since the start" > "$runs/before.txt"
  # the compiled grids alone (warm/plan.json); the cores per rank the most ranks listed leave; the models
  cpus_models=$(python -c 'import json, os, sys; p = json.load(open(sys.argv[1])); grids = p.pop("grids", [{}])
gs = [g for g in grids if "compile" in {**p, **g}.get("step", [])]; json.dump({**p, "grids": gs}, open(sys.argv[2], "w"))
ranks = max((r for g in gs for r in {**p, **g}.get("ranks", [1])), default=1)
print(max(1, len(os.sched_getaffinity(0)) // ranks), *dict.fromkeys(m for g in gs for m in {**p, **g}["models"]))' \
    "$plan" "$runs/warm/plan.json")
  read -r cpus models <<< "$cpus_models"
  if [ -n "$part" ]; then   # of a part, only the models its own cells compile (a photo part: one of two)
    models=$(python -c 'import sys, torch; from bench.cli.main import _parse; from bench.cli.measure import specs_for
_, grids = _parse(["sweep", "--config", sys.argv[1], "--part", sys.argv[2], "--out", "unused"])
print(*dict.fromkeys(s.model for s in specs_for(grids, torch.device("cuda"), priced_only=True) if s.step == "compile"))' \
      "$plan" "$part") || models=$(echo "$cpus_models" | cut -d" " -f2-)   # failing that, every compiled model
  fi
  for model in $models; do   # the compiled grids' options, but model-only, in one process per rank count,
    # compiling on inductor's workers (nothing of it is timed; the sweep's in-process compiles find the cache)
    TORCHINDUCTOR_COMPILE_THREADS=$cpus python -m bench.cli sweep --config "$runs/warm/plan.json" --modes model --models "$model" --step compile \
      --processes 1 --warmup 0 --cpus "$cpus" --out "$runs/warm/$model" > "$runs/warm/$model.txt" 2>&1 &
  done
  wait
  echo "the compile into inductor's cache ($models): $SECONDS s since the start" >> "$runs/before.txt"
  setsid bash -c "python -m bench.cli sweep --config $plan ${part:+--part $part} --out $runs/sweep > $runs/sweep.txt 2>&1; rc=\$?; \
    grep '^cpu ' /proc/stat >> $runs/cpu.txt; ${AFTER:-true} >> $runs/sweep.txt 2>&1; echo \$rc > $runs/sweep.rc" < /dev/null > /dev/null 2>&1 &
fi
while [ ! -e "$runs/sweep.rc" ] && [ "$SECONDS" -lt "${WAIT_S:-570}" ]; do sleep 5; done
(cd "$runs" && tar cf "$OUT/${runs#runs/}.tar" $(ls -d nvidia-smi.txt cpu.txt prepare.txt before.txt sweep.txt sweep 2> /dev/null))
tail -c 300 "$runs/prepare.txt"; echo; tail -c 300 "$runs/sweep.txt"; echo; cat "$runs/sweep.rc" 2>/dev/null || echo running
