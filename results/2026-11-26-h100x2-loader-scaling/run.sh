# What ran on the 2-GPU machine (nvidia-h100-x2 kind), from the project root, DALI unpacked beside it
# (.devcarry/env.sh) before the sweep, all calls on one lease:
#   TESTS=ddp   the 2-GPU DDP step test and the captured-step tests (first call, before DALI is there);
#   TESTS=gpu   every other test that needs a GPU (those that skip on a CPU-only machine);
#   PROBE=1     the ladder probe (bench/plans/ladder-probe.json: model-only speed of the candidate models
#               for issue 36, one GPU), before DALI is there;
#   SWEEP_S=n   the loader plan (bench/plans/multi-gpu-loader.json: every loader configuration on 1 and on
#               2 GPUs), stopped by SIGINT after n seconds; the same command on the same warm
#               machine resumes it from runs/multi-gpu-loader (one invocation).
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
DDP="tests/test_distributed.py::test_captured_and_compiled_ddp_steps_train_the_same_model_as_eager_ddp_on_two_gpus
  tests/test_step.py::test_captured_step_trains_the_same_model_as_eager
  tests/test_step.py::test_captured_step_refuses_a_batch_of_another_shape"
GPU="tests/test_contract.py::test_crop_normalize_is_the_padded_crop_mirrored_then_normalized
  tests/test_contract.py::test_compiling_the_kernel_starts_no_compile_worker_process
  tests/test_imagefolder.py::test_gpu_decoding_pipelines_cut_the_same_crops_as_dataloader
  tests/test_instrument.py::test_the_busy_step_runs_its_label_and_loads_every_sm
  tests/test_instrument.py::test_every_replay_of_a_window_is_read_and_a_cold_cache_does_not_lengthen_the_step
  tests/test_instrument.py::test_a_new_steps_first_calls_run_as_long_as_later_ones
  tests/test_instrument.py::test_a_step_fitted_on_a_gpu_that_idles_between_steps_runs_its_label
  tests/test_instrument.py::test_the_calibration_does_not_count_host_stalls
  tests/test_instrument.py::test_cuda_waits_block_instead_of_spinning
  tests/test_instrument.py::test_the_steady_rate_never_counts_a_drained_queue_as_free_time
  tests/test_instrument.py::test_no_compile_worker_is_alive_during_a_timed_window
  tests/test_streams.py::test_side_stream_batches_are_right_without_host_syncs"
case "${TESTS:-}" in
  ddp) timeout 300 python -m pytest -q -rs -p no:cacheprovider $DDP > "$OUT/pytest-gpu-ddp.txt" 2>&1
       tail -4 "$OUT/pytest-gpu-ddp.txt" ;;
  gpu) timeout 300 python -m pytest -q -rs -p no:cacheprovider $GPU > "$OUT/pytest-gpu.txt" 2>&1
       tail -4 "$OUT/pytest-gpu.txt" ;;
esac
if [ "${PROBE:-0}" = 1 ]; then
  timeout 500 python -m bench.cli sweep --config bench/plans/ladder-probe.json --out runs/ladder-probe \
    > "$OUT/probe.txt" 2>&1
  tail -c 600 "$OUT/probe.txt"
  cp -r runs/ladder-probe "$OUT/"
fi
if [ "${SWEEP_S:-0}" -gt 0 ]; then
  timeout -s INT "$SWEEP_S" python -m bench.cli sweep --config bench/plans/multi-gpu-loader.json --out runs/multi-gpu-loader \
    > "$OUT/sweep-${CALL:-1}.txt" 2>&1
  tail -c 600 "$OUT/sweep-${CALL:-1}.txt"
  cp -r runs/multi-gpu-loader "$OUT/"
fi
