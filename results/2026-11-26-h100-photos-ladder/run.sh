# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh) where TESTS=dali or the sweep runs:
#   TESTS=gpu   the photo set (once), then every test that needs a GPU (those that skip on a CPU-only
#               machine) before DALI is there: DALI's cases skip;
#   TESTS=dali  the GPU test with DALI's cases, once DALI is there;
#   SWEEP_S=n   the 224-px plan (bench/plans/photos-ladder.json), stopped by SIGINT after n seconds;
#               the same command on the same warm machine resumes it from runs/photos-ladder.
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
nvidia-smi > "$OUT/nvidia-smi.txt"
[ -d runs/data/photos-seed0 ] || python -m bench.cli prepare --photos 2500 --photos-from runs/skphotos \
  --data-root runs/data > "$OUT/prepare.txt" 2>&1
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
  tests/test_runner.py::test_pipelines_sharing_a_process_share_one_compiled_step_on_the_gpu
  tests/test_step.py::test_captured_step_trains_the_same_model_as_eager
  tests/test_step.py::test_captured_step_refuses_a_batch_of_another_shape
  tests/test_streams.py::test_side_stream_batches_are_right_without_host_syncs"
case "${TESTS:-}" in
  gpu)  timeout 300 python -m pytest -q -rs -p no:cacheprovider $GPU > "$OUT/pytest-gpu.txt" 2>&1
        tail -4 "$OUT/pytest-gpu.txt" ;;
  dali) timeout 200 python -m pytest -q -rs -p no:cacheprovider \
          tests/test_imagefolder.py::test_gpu_decoding_pipelines_cut_the_same_crops_as_dataloader > "$OUT/pytest-gpu-dali.txt" 2>&1
        tail -4 "$OUT/pytest-gpu-dali.txt" ;;
esac
if [ "${SWEEP_S:-0}" -gt 0 ]; then
  timeout -s INT "$SWEEP_S" python -m bench.cli sweep --config bench/plans/photos-ladder.json --out runs/photos-ladder \
    > "$OUT/sweep-${CALL:-1}.txt" 2>&1
  tail -c 400 "$OUT/sweep-${CALL:-1}.txt"
  cp -r runs/photos-ladder "$OUT/"
fi
