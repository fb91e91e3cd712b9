# The one GPU call that checked bench/plans/on-gpu.sh at f14c5e3 (its warm compiles now read the plan
# through `sweep --config`), on an nvidia-h100-x1 machine, 2026-11-27, from the project root, with a
# small plan written there (gpucheck.json: no DALI). Its printed tables (run-output.txt) are the warm
# compiles' rows and the sweep's.
cat > bench/plans/gpucheck.json <<'PLAN'
{"batch_size": [512], "dtype": ["bfloat16"], "warmup": 3, "timeout": 300, "repeats": 1, "processes": 1,
 "min_window_s": 0.5, "max_samples": 25000,
 "grids": [{"modes": ["model", "e2e"], "cpus": [16, 4], "step": ["compile"], "share_process": true,
            "models": ["resnet9-w0.25", "resnet18"], "pipelines": ["resident", "prefetch"]}]}
PLAN
export PIPEBENCH_GIT_COMMIT=f14c5e3 PYTHONUNBUFFERED=1; bash bench/plans/on-gpu.sh gpucheck > $OUT/call.txt 2>&1; echo rc=$?
tail -5 $OUT/call.txt
for f in runs/gpucheck/warm/*/results.csv runs/gpucheck/sweep/results.csv; do echo $f; python -c "
import pandas as pd, sys; d=pd.read_csv(sys.argv[1]); print(d[['pipeline','mode','model','cpus','status','compile_s','img_per_s']].to_string())" $f; done
cat runs/gpucheck/warm/resnet18/COMMAND.txt; cp runs/gpucheck/warm/*.txt $OUT/
