"""The GPU timeline (`bench.studies.timeline`): its arithmetic on synthetic GPU work and Chrome trace events,
its table and sentences, its variants and configurations, its refusals (CPU), and one small run
(GPU, skipped without CUDA)."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.studies import host_waits, timeline
from bench.studies.timeline import Work

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MS = 1000.0   # µs per ms: the synthetic work below is written in ms
TRAIN, SIDE, OTHER, COPIES = 7, 20, 22, 21   # streams


def work(stream: int, start: float, end: float, step: int | None = None, copy: bool = False) -> Work:
    return Work(stream, start * MS, (end - start) * MS, step, copy)


# steps 0, 1, 2 on the training stream (ms): step 0 is [0, 10) + [12, 20), step 1 [30, 45), step 2 [50, 60);
# beside them the pipeline's kernels, copies, and a kernel of its own on the training stream
WORK = [work(TRAIN, 0, 10, 0), work(TRAIN, 12, 20, 0), work(TRAIN, 30, 40, 1), work(TRAIN, 40, 45, 1),
        work(TRAIN, 50, 60, 2), work(TRAIN, 22, 25),
        work(SIDE, 5, 15), work(SIDE, 18, 26), work(SIDE, 35, 55), work(OTHER, 6, 8),
        work(COPIES, 1, 29, copy=True), work(COPIES, 31, 33, copy=True)]


def test_each_step_s_busy_span_period_idle_and_the_other_streams_work():
    rows = timeline.step_rows(WORK, TRAIN)
    assert [r["step"] for r in rows] == [0, 1]   # the last step's period has no end
    first, second = rows
    assert first == pytest.approx({
        "step": 0, "stream": TRAIN, "start_ms": 0, "step_kernel_ms": 18, "step_span_ms": 20, "period_ms": 30,
        "idle_ms": 30 - 21, "idle_share": 9 / 30,           # [0, 30) less the union of [0, 10), [12, 20), [22, 25)
        "other_in_step_ms": 10 + 2 + 2,                      # inside [0, 20), summed over the streams 20 and 22
        "other_ms": 10 + 8 + 2, "other_copy_ms": 28})
    assert second == pytest.approx({
        "step": 1, "stream": TRAIN, "start_ms": 30, "step_kernel_ms": 15, "step_span_ms": 15, "period_ms": 20,
        "idle_ms": 5, "idle_share": 0.25, "other_in_step_ms": 10, "other_ms": 15, "other_copy_ms": 2})


def test_the_training_stream_carries_most_of_the_steps_own_work_not_most_work():
    busy_pipeline = [*WORK, work(SIDE, 60, 200)]   # the pipeline's stream busier than any
    assert timeline.training_stream(busy_pipeline) == TRAIN
    assert timeline.training_stream([work(3, 0, 1, 0), work(TRAIN, 1, 3, 0), work(TRAIN, 3, 4, 1)]) == TRAIN
    with pytest.raises(ValueError, match="no GPU work launched by a recorded step"):
        timeline.training_stream([work(SIDE, 0, 1)])


def test_a_step_that_launched_nothing_on_the_training_stream_is_refused():
    with pytest.raises(ValueError, match=r"steps \[0, 2\] launched work"):
        timeline.step_rows([w for w in WORK if w.step != 1], TRAIN)


def test_union_counts_overlaps_once():
    assert timeline.union([(5, 7), (0, 2), (1, 3), (6, 9)]) == 3 + 4
    assert timeline.union([]) == 0


def chrome_events() -> list[dict]:
    """A trace: steps 0 and 1 annotated on thread 1; launches on thread 1 inside and outside them and
    one on thread 2 (a pipeline's thread) inside step 0; their GPU work; metadata and flow events."""
    def launch(tid, ts, correlation, category="cuda_runtime"):
        return {"ph": "X", "cat": category, "name": "cudaGraphLaunch", "tid": tid, "ts": ts, "dur": 1,
                "args": {"correlation": correlation}}

    def gpu(category, stream, ts, dur, correlation):
        return {"ph": "X", "cat": category, "name": "k", "tid": stream, "ts": ts, "dur": dur,
                "args": {"stream": stream, "correlation": correlation}}
    return [{"ph": "X", "cat": "user_annotation", "name": f"{timeline.MARK}0", "tid": 1, "ts": 100, "dur": 50},
            {"ph": "X", "cat": "user_annotation", "name": f"{timeline.MARK}1", "tid": 1, "ts": 200, "dur": 50},
            {"ph": "X", "cat": "user_annotation", "name": "other annotation", "tid": 1, "ts": 300, "dur": 50},
            launch(1, 110, 1), launch(1, 210, 2, "cuda_driver"), launch(1, 160, 3), launch(2, 120, 4),
            launch(1, 310, 5),
            gpu("kernel", TRAIN, 1000, 30, 1), gpu("gpu_memcpy", TRAIN, 1030, 5, 1), gpu("Kernel", TRAIN, 1100, 40, 2),
            gpu("gpu_memset", TRAIN, 1050, 2, 3), gpu("kernel", SIDE, 1010, 20, 4), gpu("kernel", SIDE, 1200, 20, 5),
            {"ph": "f", "cat": "ac2g", "tid": TRAIN, "ts": 1000, "id": 1},
            {"ph": "M", "name": "thread_name", "tid": 1, "args": {"name": "python"}}]


def test_trace_events_become_work_given_to_the_step_whose_call_launched_it():
    found = timeline.work_from_trace(chrome_events())
    assert found == [Work(TRAIN, 1000, 30, 0), Work(TRAIN, 1030, 5, 0, copy=True), Work(TRAIN, 1100, 40, 1),
                     Work(TRAIN, 1050, 2, None), Work(SIDE, 1010, 20, None), Work(SIDE, 1200, 20, None)]


def rows() -> pd.DataFrame:
    """Model-only at 10, 12, 14 ms a step; `dali` at 12 and 18, with the pipeline's work."""
    def row(label, step, kernel_ms, idle_share, other_ms, jpg):
        return {"pipeline": label, "model": "torchvision:resnet50", "step_kind": "compile", "image_size": 224,
                "batch_size": 256, "dtype": "bfloat16", "cpus": 16, "source": "imagefolder:photos", "step": step,
                "stream": TRAIN, "start_ms": 20.0 * step, "step_kernel_ms": kernel_ms, "step_span_ms": kernel_ms + 1,
                "period_ms": 20.0, "idle_ms": 20 * idle_share, "idle_share": idle_share,
                "other_in_step_ms": other_ms / 2, "other_ms": other_ms, "other_copy_ms": 1.0, "gpu_jpg_util": jpg}
    return timeline.with_stretch(pd.DataFrame([
        row("model-only", 0, 10.0, 0.0, 0.0, None), row("model-only", 1, 12.0, 0.1, 0.0, None),
        row("model-only", 2, 14.0, 0.2, 0.0, None),
        row("dali", 0, 12.0, 0.3, 4.0, 50), row("dali", 1, 18.0, 0.5, 6.0, 50)]))


def test_the_stretch_is_each_steps_kernel_time_over_model_onlys_median():
    assert list(rows().stretch) == pytest.approx([10 / 12, 1.0, 14 / 12, 1.0, 1.5])


def test_the_table_gives_medians_ranges_and_n_per_configuration_and_a_sentence_each():
    table = timeline.table(rows())
    assert list(table.configuration) == ["`model-only`", "`dali`"] and list(table.n) == [3, 2]
    dali = table.iloc[1]
    assert dali.stretch == "1.25 [1.00–1.50]" and dali["idle %"] == "40 [30–50]"
    assert dali["other streams ms"] == "5.00 [4.00–6.00]" and dali["JPEG engine %"] == "50 [50–50]"
    assert table.iloc[0]["JPEG engine %"] == ""
    assert timeline.sentences(rows()) == [
        "Alone, the step's own GPU work took 12.00 ms per step and the training stream idled 10 % of each step's "
        "period.",
        "Beside `dali` the step's own GPU work took 1.25 × its time alone and the training stream idled 40 % of each "
        "step's period; other streams ran 5.00 ms of kernels per step, 2.50 ms of them during the step."]
    waits = [host_waits.summary(*trace_calls()) | {"configuration": "dali"}]
    syncs = host_waits.sync_calls(TRACE, timeline.MARK, [15 * MS, 38 * MS]).assign(pipeline="dali")
    text = timeline.report(rows(), "python -m bench.studies.timeline --out x --pipelines dali", waits, syncs)
    assert text.count("\n| `") == 5 and "host-calls.csv" in text and "host-syncs.csv" in text and "timeline.png" in text and "`torchvision:resnet50`, compile step, 224 px, batch 256, bfloat16, 16 cores" in text


def test_a_variant_is_a_pipeline_with_knobs_it_reads():
    assert timeline.parse_variant("dali") == ("dali", {})
    assert timeline.parse_variant("dali:dali_decoder=cpu,dali_hw_decoder_load=0.5") == (
        "dali", {"dali_decoder": "cpu", "dali_hw_decoder_load": 0.5})
    assert timeline.parse_variant("dataloader:pin_memory=true,non_blocking=false") == (
        "dataloader", {"pin_memory": True, "non_blocking": False})
    assert timeline.knob_tokens({"pin_memory": True, "non_blocking": False, "num_workers": 3, "dali_decoder": "cpu"}) \
        == ["--pin-memory", "--workers", "3", "--dali-decoder", "cpu"]


def test_the_example_variant_is_made_from_the_knobs_declaration():
    """The help's example names DALI's decoder knob and a value it takes from its declaration
    (`pipelines.dali_options.DECODER`), not by hand; the docstring shows the same example."""
    from pipelines.dali_options import DECODER
    name, knobs = timeline.parse_variant(timeline.EXAMPLE)
    assert name == "dali" and list(knobs) == [DECODER.name] and knobs[DECODER.name] != DECODER.default
    assert f"`{timeline.EXAMPLE}`" in timeline.__doc__


SWEEP_ONLY = {"-h", "--help", "--config", "--resume-other-commit", "--debug"}   # a sweep's run, not its options


def test_the_timeline_takes_the_sweeps_options_without_the_command_line():
    """The timeline's options are `pipebench sweep`'s, each with its destination, default, choices
    and arity, from `bench.running.options` (it built the CLI's whole parser: issue 69); the sweep's
    parser built from anything else would show here."""
    from bench import cli

    def table(parser):
        return {flag: (a.dest, a.default, a.nargs, a.choices, a.const, type(a).__name__)
                for a in parser._actions for flag in a.option_strings}
    sweep = cli.build_parser()._subparsers._group_actions[0].choices["sweep"]
    ours = timeline.sweep_options()
    assert table(ours) == {flag: row for flag, row in table(sweep).items() if flag not in SWEEP_ONLY}
    assert not ours.allow_abbrev and not ours.exit_on_error


@pytest.mark.parametrize("text, words", [
    ("dalix", "unknown pipeline 'dalix'"), ("dali:foo=1", "'foo=1' is not knob=value"),
    ("dali:dali_decoder", "'dali_decoder' is not knob=value"), ("prefetch:dali_decoder=cpu", "a knob prefetch reads"),
    ("dali:dali_decoder=gpu", "dali_decoder='gpu'"), ("dataloader:pin_memory=yes", "expected true or false")])
def test_a_bad_variant_is_one_line_naming_it(text, words):
    with pytest.raises(ValueError, match=words) as error:
        timeline.parse_variant(text)
    assert repr(text) in str(error.value) and "\n" not in str(error.value)


def test_configurations_are_the_sweeps_model_only_and_e2e_with_the_variants_knobs():
    model, variants = timeline.configurations(
        ["prefetch", "dataloader:pin_memory=true"], ["--models", "resnet9-w0.25", "--batch-size", "64", "--cpus", "1"],
        torch.device("cuda"))
    assert (model.mode, model.pipeline, model.step, model.requested_steps, model.cpus) == ("model", "none", "compile", 20, 1)
    assert [(label, s.mode, s.pipeline, s.step) for label, s in variants] == [
        ("prefetch", "e2e", "prefetch", "compile"), ("dataloader:pin_memory=true", "e2e", "dataloader", "compile")]
    assert variants[1][1].config.pin_memory and variants[1][1].config.batch_size == 64


@pytest.mark.parametrize("variants, options, words", [
    (["prefetch", "prefetch"], [], "give each variant once"),
    (["prefetch"], ["--models", "resnet18,resnet9"], "2 model-only"),
    (["prefetch"], ["--bogus", "1"], "unknown option"),
    (["prefetch"], ["--image-size", "100"], "argument --image-size")])
def test_configurations_refuse_bad_options_in_one_line(variants, options, words):
    with pytest.raises(ValueError, match=words) as error:
        timeline.configurations(variants, options, torch.device("cuda"))
    assert "\n" not in str(error.value)


def test_bad_input_and_no_cuda_are_one_line_and_exit_2_writing_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert timeline.main(["--out", str(out), "--pipelines", "dalix"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown pipeline 'dalix'" in err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert timeline.main(["--out", str(out), "--pipelines", "dali"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a CUDA device" in err and not out.exists()


@needs_cuda
def test_a_small_timeline_writes_its_files_and_its_numbers_obey_physics(tmp_path, synthetic_root):
    out = tmp_path / "out"
    variants = ["prefetch", "dataloader:pin_memory=true,non_blocking=true"]
    assert timeline.main(["--out", str(out), "--pipelines", *variants, "--models", "resnet9-w0.25", "--step", "graph",
                          "--batch-size", "128", "--cpus", "2", "--steps", "6", "--warmup", "2",
                          "--source", "synthetic", "--data-root", str(synthetic_root), "--max-samples", "2048"]) == 0
    df = pd.read_csv(out / "timeline.csv")
    assert list(df.pipeline.unique()) == ["model-only", *variants] and (df.groupby("pipeline").size() == 6).all()
    assert (df.stretch > 0).all() and df.idle_share.between(0, 1).all()
    assert (df.step_kernel_ms <= df.step_span_ms + 1e-9).all() and (df.step_span_ms <= df.period_ms + 1e-9).all()
    assert (df[["other_in_step_ms", "other_ms", "other_copy_ms"]] >= 0).all().all()
    assert df.stream.nunique() == 1   # the step runs on the training thread's stream in every configuration
    text = (out / "TIMELINE.md").read_text()
    assert all(f"`{v}`" in text for v in variants) and (out / "timeline.png").stat().st_size > 0
    calls = pd.read_csv(out / "host-calls.csv")   # the training thread's CUDA calls and batch waits, every configuration
    training = calls[calls.thread == "training"]
    assert set(training.pipeline) == {"model-only", *variants} and (calls.ms_per_step >= 0).all()
    assert set(training[training.kind == "batch wait"].pipeline) == {"model-only", *variants}
    syncs = pd.read_csv(out / "host-syncs.csv")   # the pipelines' threads' synchronizing calls, if any, by name
    assert set(syncs.pipeline) <= set(variants) and syncs.ended_with_step.between(0, 1).all()
    assert text.count("\n| `") == 2 * (1 + len(variants)) + len(syncs.groupby("pipeline").head(3))   # the tables' rows


def test_the_picture_draws_a_panel_per_configuration(tmp_path):
    steps = timeline.step_rows(WORK, TRAIN)
    path = tmp_path / "timeline.png"
    timeline.draw({"model-only": ([w for w in WORK if w.stream == TRAIN], TRAIN, steps), "dali": (WORK, TRAIN, steps)},
                  path)
    assert path.read_bytes().startswith(b"\x89PNG")


def call(tid, name, start, end, correlation=None, cat="cuda_runtime"):
    return {"ph": "X", "cat": cat, "name": name, "tid": tid, "ts": start * MS, "dur": (end - start) * MS,
            "args": {} if correlation is None else {"correlation": correlation}}


def gpu(stream, start, end, correlation, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": "k", "tid": stream, "ts": start * MS, "dur": (end - start) * MS,
            "args": {"stream": stream, "correlation": correlation}}


def mark(tid, name, start, end):
    return {"ph": "X", "cat": "user_annotation", "name": name, "tid": tid, "ts": start * MS, "dur": (end - start) * MS}


# two recorded steps on thread 1 over [0, 40) ms, their batch fetches 2 and 6 ms; a producer thread 2 that
# synchronizes 10 ms (ending as step 0's GPU work ends) and frees 1 ms, a thread 3 that copies and
# synchronizes 1.4 ms (ending with nothing) and 0.05 ms (just after step 0's end, but begun after it);
# a call outside the span is not counted;
# the pipeline's kernels: one launched at 5 (the step runs [0, 15)) starting at 15, one launched at 22
# (the training stream idle) starting at 22.5, a copy launched at 31 (busy [30, 38)) starting at 34
TRACE = [mark(1, timeline.MARK + "0", 0, 20), mark(1, timeline.MARK + "1", 20, 40),
         mark(1, host_waits.NEXT_MARK + "0", 0, 2), mark(1, host_waits.NEXT_MARK + "1", 20, 26),
         call(1, "cudaGraphLaunch", 3, 4, 1), call(1, "cudaGraphLaunch", 27, 28, 2),
         gpu(TRAIN, 0, 15, 1), gpu(TRAIN, 30, 38, 2),
         call(2, "cudaStreamSynchronize", 5, 15), call(2, "cuMemFree_v2", 16, 17, cat="cuda_driver"),
         call(2, "cudaLaunchKernel", 5, 5.5, 10), call(2, "cudaLaunchKernel", 22, 22.2, 11),
         call(3, "cudaMemcpyAsync", 31, 31.5, 12), call(3, "cudaEventSynchronize", 50, 60),
         call(3, "cuEventSynchronize", 31.6, 33, cat="cuda_driver"), call(3, "cuEventSynchronize", 15.05, 15.1),
         gpu(SIDE, 15, 16, 10), gpu(SIDE, 22.5, 23, 11), gpu(COPIES, 34, 35, 12, "gpu_memcpy")]


def trace_calls():
    return host_waits.host_calls(TRACE, timeline.MARK), host_waits.queueing(TRACE, TRAIN)


def test_host_calls_per_thread_and_kind_per_recorded_step_and_the_batch_wait():
    calls, _ = trace_calls()
    got = {(r.thread, r.kind): tuple(round(v, 9) for v in (r.ms_per_step, r.calls_per_step, r.longest_ms))
           for r in calls.itertuples()}
    assert got == ({
        ("training", "batch wait"): (4, 1, 6), ("training", "launch"): (1, 1, 1),
        ("thread 1", "sync"): (5, 0.5, 10), ("thread 1", "alloc"): (0.5, 0.5, 1), ("thread 1", "launch"): (0.35, 1, 0.5),
        ("thread 2", "copy"): (0.25, 0.5, 0.5), ("thread 2", "sync"): (0.725, 1, 1.4)})   # not its sync at 50 ms
    assert list(calls.thread[:2]) == ["training", "training"]
    assert [host_waits.call_kind(n) for n in ("cuStreamSynchronize", "cudaMallocAsync", "cudaHostRegister",
                                              "cudaMemsetAsync", "cudaLaunchKernel")] == [
        "sync", "alloc", "alloc", "copy", "launch"]


def test_queueing_tells_work_launched_while_the_step_runs_from_work_launched_while_it_idles():
    calls, queued = trace_calls()
    assert sorted((round(d, 9), during) for d, during in queued.values.tolist()) == [(0.5, False), (3, True), (10, True)]
    s = host_waits.summary(calls, queued)
    assert s == pytest.approx({"batch_wait_ms": 4, "training_sync_ms": 0, "pipeline_sync_ms": 5, "pipeline_alloc_ms": 0.5,
                               "queue_busy_n": 2, "queue_busy_ms": 6.5, "queue_busy_p90_ms": 9.3,
                               "queue_idle_n": 1, "queue_idle_ms": 0.5, "queue_idle_p90_ms": 0.5})
    assert host_waits.sentence(s | {"configuration": "dali"}) == (
        "`dali`: the training thread waited 4.00 ms per step for its batch; of the pipeline's threads, the one most "
        "in synchronizing CUDA calls spent 5.00 ms per step in them, the one most in allocations 0.50 ms; its GPU "
        "work launched while the step ran waited 6.50 ms (median) to start, launched while the training stream "
        "idled 0.50 ms.")


def test_synchronizing_calls_by_name_and_the_share_that_ended_as_a_steps_gpu_work_ended():
    """Step 0's GPU work ends at 15 ms, step 1's at 38: the 10-ms stream synchronization ends at 15
    (with the step); the event synchronizations end at 33 (with nothing) and at 15.1 (begun after
    the step's end: not with it); a 0.2-ms window after each of 2 step ends covers 1 % of the 40-ms span."""
    syncs = host_waits.sync_calls(TRACE, timeline.MARK, [15 * MS, 38 * MS])
    assert host_waits.step_ends(WORK, TRAIN) == [20 * MS, 45 * MS, 60 * MS]   # each step's last work on the stream
    assert list(syncs.name) == ["cudaStreamSynchronize", "cuEventSynchronize"]
    assert syncs.drop(columns="name").round(9).values.tolist() == [[0.5, 5, 10, 10, 1, 0.01], [1, 0.725, 0.725, 1.4, 0, 0.01]]
    table = " ".join(host_waits.sync_table(syncs.assign(pipeline="dali")).split())   # the cells, not their padding
    assert "| `dali` | `cudaStreamSynchronize` | 0.5 | 5.00 | 10.000 [10.00] | 100 (by chance 1.0) |" in table
