# The reference plan (reference.json) on a GPU machine reached in calls of at most 10 minutes (one
# H100, 16 cores): the same command in every call, from the project root, on one warm machine, DALI
# importable (.devcarry/env.sh where it is carried). The first call records nvidia-smi, compiles each
# model's step once, all models at once, into inductor's cache (runs/warm-*: not part of the run;
# compilation is outside every window anyway, and this spares the sweep's first processes their
# cold compile), then starts the sweep in a process session of its own (setsid), so that it runs on
# between calls, uninterrupted. Every call waits for it to end (at most WAIT_S seconds from the
# call's start) and copies what it wrote to $OUT. PIPEBENCH_GIT_COMMIT: where the tree has no .git.
set -u
mkdir -p runs
if [ ! -e runs/ladder.started ]; then
  touch runs/ladder.started
  nvidia-smi > runs/nvidia-smi.txt
  python -c "from pipelines import PipelineConfig; from pipelines.sources.split import resolve_folder; \
resolve_folder(PipelineConfig())"   # the synthetic set, once, before the processes below read it
  for m in $(python -c "import json; print(*json.load(open('bench/plans/reference.json'))['grids'][0]['models'])"); do
    python -m bench.cli sweep --modes model --models "$m" --step compile --batch-size 512 --dtype bfloat16 \
      --processes 1 --steps 1 --warmup 0 --out "runs/warm-$m" > "runs/warm-$m.txt" 2>&1 &
  done
  wait
  setsid bash -c 'python -m bench.cli sweep --config bench/plans/reference.json --out runs/ladder \
    > runs/sweep.txt 2>&1; echo $? > runs/sweep.rc' < /dev/null > /dev/null 2>&1 &
fi
while [ ! -e runs/sweep.rc ] && [ "$SECONDS" -lt "${WAIT_S:-570}" ]; do sleep 5; done
cp runs/nvidia-smi.txt runs/sweep.txt runs/ladder/* "$OUT/" 2>/dev/null
tail -c 300 runs/sweep.txt; echo; cat runs/sweep.rc 2>/dev/null || echo running
