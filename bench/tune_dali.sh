#!/usr/bin/env bash
# DALI tuning sweep, then the GPU-decode comparison with the best measured settings.
#   1. loader-only `dali` runs varying one knob at a time around the defaults: batch size,
#      num_threads, prefetch queue depth, hw_decoder_load, decoder (nvJPEG / libjpeg-turbo),
#      training batches per DALI batch, reader; and e2e (ResNet-18) runs of
#      the external_source and file readers, since a reader's cost shows only next to a training
#      step (the file reader runs no Python per batch: the control)        -> OUT/tuning/
#      (the parallel external_source is left out: see aborted-parallel-source-run.log)
#   2. the knobs with the highest median loader-only img/s at batch 512 (external_source reader,
#      which dali-raw shares) are used for a full comparison (loader / model-only / e2e) of dali,
#      dali-raw and tvjpeg, plus dali with the file reader               -> OUT/comparison/
# Every invocation appends its exact command to the folder's COMMAND.txt.
# usage: bash bench/tune_dali.sh OUT     (PIPEBENCH="python3 -m bench.cli" where not installed)
set -euo pipefail
out=${1:?usage: bash bench/tune_dali.sh OUT}
pb=${PIPEBENCH:-pipebench}
tune() { $pb compare --pipelines dali --modes loader --repeats 3 --out "$out/tuning" "$@" >/dev/null; }
for bs in 512 256 1024; do tune --batch-size "$bs"; done
for threads in 4 8 12; do tune --dali-threads "$threads"; done
for depth in 2 3; do tune --dali-queue-depth "$depth"; done
tune --dali-hw-decoder-load 0.65
tune --dali-decoder cpu
for multiple in 1 2 8; do tune --dali-batch-multiple "$multiple"; done
for reader in external file; do tune --dali-reader "$reader"; done
for reader in external file; do
  $pb compare --pipelines dali --modes e2e --repeats 3 --out "$out/tuning" --dali-reader "$reader" >/dev/null
done
best=$(python3 - "$out/tuning/results.csv" <<'PY'
import sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
df = df[(df.status == "ok") & (df.batch_size == 512)]
loader = df[(df["mode"] == "loader") & (df.dali_reader == "external")]
knobs = ["dali_threads", "dali_queue_depth", "dali_hw_decoder_load", "dali_decoder", "dali_batch_multiple"]
best = loader.groupby(knobs).img_per_s.median().idxmax()
print(" ".join(f"--{k.replace('_', '-')} {v}" for k, v in zip(knobs, best)))
PY
)
echo "best at batch 512: $best"
$pb compare --pipelines dali,dali-raw,tvjpeg --out "$out/comparison" $best
$pb compare --pipelines dali --modes loader,e2e --dali-reader file --out "$out/comparison" $best
