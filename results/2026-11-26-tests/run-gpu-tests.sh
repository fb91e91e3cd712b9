# The GPU tests (every test that skips without a GPU but the 2-GPU one), run on the GPU machine from
# the project root, DALI unpacked beside it (.devcarry/env.sh): bash results/2026-11-26-tests/run-gpu-tests.sh
set -u
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
timeout 400 python -m pytest -q -rs -p no:cacheprovider $GPU
