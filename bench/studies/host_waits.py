"""Where a pipeline's time goes on the host and in the GPU's queues, from the Chrome trace of a
timeline recording (`bench.studies.timeline`): what each thread spends in CUDA calls, how long the
training thread waits for its batch, and how long the pipeline's GPU work waits to start.

Over the recorded steps' span (the first recorded step's call to the last one's end):
- *host calls*: every CUDA runtime and driver call the trace holds (CUPTI records them on every
  thread of the process: the training thread's, the pipeline's producer threads', DALI's and
  nvJPEG's own), per thread and kind, ms per recorded step: `sync` (a call whose name says it
  synchronizes: the thread waits for GPU work to end), `alloc` (allocations, frees, host
  registrations: a device-wide synchronization where they reach the driver), `copy` (memcpy and
  memset calls, asynchronous or not: one from pageable memory waits for its staging), `launch` (the
  rest); the longest single call too. Threads are named `training` (the one whose calls are inside
  the recorded steps) or by their rank in total call time (`thread 1` the most);
- *batch wait*: the training thread's time inside the pipeline's `next()` (the timeline marks each
  recorded call with NEXT_MARK), ms per recorded step: how long the step waited for its input;
- *synchronizing calls by name*: per name, on the pipeline's threads: calls and ms per recorded step,
  the median and longest call, and the share of calls that ended within ENDED_WITH_STEP_MS after a
  recorded step's GPU work ended (its last piece of work on the training stream): a call that waits,
  directly or not, for the step ends there; by chance a call ends there about as often as that window
  covers the span (the share `by_chance`, given beside it);
- *queueing*: per piece of the pipeline's GPU work (kernels, memsets and copies on other streams than
  the training stream), from the start of the call that launched it to its start on the GPU, split by
  whether the training stream was running work at that call's start: whether its work waits behind
  the step's (and an idle GPU's queueing beside it, in the same trace).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

NEXT_MARK = "timeline next "   # the record_function name of a recorded step's batch fetch
ENDED_WITH_STEP_MS = 0.2        # a synchronizing call ending this soon after a step's GPU work ended ended with it
KINDS = (("sync", ("synchronize",)), ("alloc", ("malloc", "free", "memalloc", "hostalloc", "hostregister",
                                                "hostunregister", "mempool")), ("copy", ("memcpy", "memset")))
CALLS = ("cuda_runtime", "cuda_driver")
WORK = ("kernel", "gpu_memset", "gpu_memcpy")


def call_kind(name: str) -> str:
    """A CUDA call's kind by its name (module docstring)."""
    lower = name.lower()
    return next((kind for kind, words in KINDS if any(word in lower for word in words)), "launch")


def _category(event: dict) -> str:
    return str(event.get("cat", "")).lower()


def _marked(events: list[dict], mark: str) -> list[dict]:
    return [e for e in events if _category(e) == "user_annotation" and str(e.get("name", "")).startswith(mark)]


def _recorded(events: list[dict], step_mark: str) -> tuple[int, float, float, set]:
    """The recorded steps' count, span (µs, from the first one's call to the last one's end) and threads."""
    steps = _marked(events, step_mark)
    if not steps:
        raise ValueError(f"the trace holds no recorded step ({step_mark!r})")
    return len(steps), min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps), {e["tid"] for e in steps}


def host_calls(events: list[dict], step_mark: str) -> pd.DataFrame:
    """Per thread and kind of call: ms and calls per recorded step, the longest call (ms), over the
    recorded steps' span (module docstring); plus the training thread's batch wait as kind `batch wait`."""
    n, low, high, training = _recorded(events, step_mark)
    calls = pd.DataFrame([{"tid": e["tid"], "kind": call_kind(str(e.get("name", ""))), "dur": float(e["dur"])}
                          for e in events if _category(e) in CALLS and e.get("ph") == "X" and low <= e["ts"] <= high])
    waits = pd.DataFrame([{"tid": e["tid"], "kind": "batch wait", "dur": float(e["dur"])}
                          for e in _marked(events, NEXT_MARK) if low <= e["ts"] <= high])
    found = pd.concat([calls, waits], ignore_index=True)
    if found.empty:
        return pd.DataFrame(columns=["thread", "kind", "ms_per_step", "calls_per_step", "longest_ms"])
    totals = found[~found.tid.isin(training)].groupby("tid").dur.sum().sort_values(ascending=False)
    ranks = {tid: 0 for tid in training} | {tid: k for k, tid in enumerate(totals.index, 1)}
    rows = pd.DataFrame([{"rank": ranks[tid], "thread": f"thread {ranks[tid]}" if ranks[tid] else "training",
                          "kind": kind, "ms_per_step": g.dur.sum() / 1e3 / n, "calls_per_step": len(g) / n,
                          "longest_ms": g.dur.max() / 1e3} for (tid, kind), g in found.groupby(["tid", "kind"])])
    return rows.sort_values(["rank", "kind"]).drop(columns="rank").reset_index(drop=True)


def sync_calls(events: list[dict], step_mark: str, step_ends: list[float]) -> pd.DataFrame:
    """Per name of synchronizing call on the pipeline's threads over the recorded steps' span: calls
    and ms per recorded step, the median and longest call (ms), the share that ended with a step
    (`step_ends`: the µs at which each step's GPU work ended) and that share by chance (module docstring)."""
    n, low, high, training = _recorded(events, step_mark)
    window = ENDED_WITH_STEP_MS * 1e3
    ends = np.sort(np.asarray(step_ends, dtype=float))
    rows = []
    for e in events:
        if (_category(e) in CALLS and e.get("ph") == "X" and low <= e["ts"] <= high and e["tid"] not in training
                and call_kind(str(e.get("name", ""))) == "sync"):
            end = float(e["ts"] + e["dur"])
            k = np.searchsorted(ends, end, side="right") - 1   # the last step end before the call's end
            rows.append({"name": str(e["name"]), "dur": float(e["dur"]),
                         "with_step": bool(k >= 0 and ends[k] >= e["ts"] and end - ends[k] <= window)})
    found = pd.DataFrame(rows, columns=["name", "dur", "with_step"])
    chance = min(1.0, window * len(ends) / max(high - low, 1.0))
    columns = ["name", "calls_per_step", "ms_per_step", "median_ms", "longest_ms", "ended_with_step", "by_chance"]
    by_name = pd.DataFrame([(name, len(g) / n, g.dur.sum() / 1e3 / n, g.dur.median() / 1e3, g.dur.max() / 1e3,
                             g.with_step.mean(), chance) for name, g in found.groupby("name")], columns=columns)
    return by_name.sort_values("ms_per_step", ascending=False, ignore_index=True)


def step_ends(work, stream: int) -> list[float]:
    """When each recorded step's GPU work on the training stream `stream` ended (µs): its last piece's
    end (`work`: the timeline's `Work`, each with its step, stream and end)."""
    ends: dict[int, float] = {}
    for w in work:
        if w.step is not None and w.stream == stream:
            ends[w.step] = max(ends.get(w.step, w.end), w.end)
    return sorted(ends.values())


def queueing(events: list[dict], stream: int) -> pd.DataFrame:
    """Per piece of the pipeline's GPU work (not on `stream`, the training stream) whose launching
    call the trace holds: its queueing delay (ms) and whether `stream` ran work at that call's start."""
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if _category(e) in CALLS and "correlation" in e.get("args", {})}
    gpu = [e for e in events if _category(e) in WORK and e.get("ph") == "X"]
    busy = sorted((float(e["ts"]), float(e["ts"] + e["dur"])) for e in gpu if int(e["args"]["stream"]) == stream)
    starts, ends = np.array([b[0] for b in busy]), np.maximum.accumulate(np.array([b[1] for b in busy] or [0.0]))
    rows = []
    for e in gpu:
        launched = launches.get(e["args"].get("correlation"))
        if int(e["args"]["stream"]) == stream or launched is None:
            continue
        k = np.searchsorted(starts, launched, side="right") - 1   # the last training work started by then
        rows.append({"delay_ms": (float(e["ts"]) - launched) / 1e3, "during_step": bool(k >= 0 and ends[k] > launched)})
    return pd.DataFrame(rows, columns=["delay_ms", "during_step"])


def summary(calls: pd.DataFrame, queued: pd.DataFrame) -> dict:
    """The numbers a configuration's sentence and table row quote: the training thread's batch wait and
    sync time, the most any other thread spent in sync and in alloc calls (ms per step), the queueing
    medians and p90s."""
    def per_step(thread_filter, kind):
        rows = calls[thread_filter & (calls.kind == kind)]
        return float(rows.ms_per_step.max()) if len(rows) else 0.0

    others = calls.thread != "training"
    found = {"batch_wait_ms": per_step(~others, "batch wait"), "training_sync_ms": per_step(~others, "sync"),
             "pipeline_sync_ms": per_step(others, "sync"), "pipeline_alloc_ms": per_step(others, "alloc")}
    for during, label in ((True, "busy"), (False, "idle")):
        delays = queued.delay_ms[queued.during_step == during]
        found |= {f"queue_{label}_n": len(delays),
                  f"queue_{label}_ms": float(delays.median()) if len(delays) else float("nan"),
                  f"queue_{label}_p90_ms": float(delays.quantile(0.9)) if len(delays) else float("nan")}
    return found


def table(found: list[dict]) -> str:
    """A markdown table of `summary`'s numbers, a row per configuration (its `configuration` key)."""
    def delay(s, label):
        n = s[f"queue_{label}_n"]
        return f"{n}: {s[f'queue_{label}_ms']:.2f} [{s[f'queue_{label}_p90_ms']:.2f}]" if n else "0"

    return pd.DataFrame([{
        "configuration": f"`{s['configuration']}`", "batch wait ms": f"{s['batch_wait_ms']:.2f}",
        "training thread sync ms": f"{s['training_sync_ms']:.2f}",
        "pipeline thread sync ms": f"{s['pipeline_sync_ms']:.2f}", "pipeline thread alloc ms": f"{s['pipeline_alloc_ms']:.2f}",
        "queued while the step runs: n: median [p90] ms": delay(s, "busy"),
        "queued while it idles: n: median [p90] ms": delay(s, "idle")} for s in found]).to_markdown(index=False)


def sentence(s: dict) -> str:
    """What a configuration's numbers say, in one sentence."""
    busy, idle = s["queue_busy_ms"], s["queue_idle_ms"]
    queued = (f"its GPU work launched while the step ran waited {busy:.2f} ms (median) to start, launched while the "
              f"training stream idled {idle:.2f} ms" if s["queue_busy_n"] and s["queue_idle_n"] else
              "too little of its GPU work was launched both while the step ran and while it idled to compare")
    return (f"`{s['configuration']}`: the training thread waited {s['batch_wait_ms']:.2f} ms per step for its "
            f"batch; of the pipeline's threads, the one most in synchronizing CUDA calls spent {s['pipeline_sync_ms']:.2f} "
            f"ms per step in them, the one most in allocations {s['pipeline_alloc_ms']:.2f} ms; {queued}.")


def sync_table(syncs: pd.DataFrame, top: int = 3) -> str:
    """A markdown table of `sync_calls`' rows (with their `pipeline`), each configuration's `top` names
    by time."""
    rows = syncs.groupby("pipeline", sort=False).head(top)
    return pd.DataFrame({
        "configuration": rows.pipeline.map(lambda v: f"`{v}`"), "call": rows.name.map(lambda v: f"`{v}`"),
        "calls per step": rows.calls_per_step.map(lambda v: f"{v:.1f}"),
        "ms per step": rows.ms_per_step.map(lambda v: f"{v:.2f}"),
        "median [longest] ms": [f"{m:.3f} [{x:.2f}]" for m, x in zip(rows.median_ms, rows.longest_ms)],
        "ended with a step %": [f"{100 * w:.0f} (by chance {100 * c:.1f})"
                                for w, c in zip(rows.ended_with_step, rows.by_chance)]}).to_markdown(
        index=False, disable_numparse=True)
