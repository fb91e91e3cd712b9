"""Smoke check on the GPU machine: each photo decoder builds and runs one epoch on 4 cores."""
import os, sys, time, torch, pipelines
from pipelines import PipelineConfig
os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:4]))
src = "imagefolder:runs/data/photos-seed0"
for name, extra in [("nvimgcodec", {}), ("nvimgcodec", {"nvimgcodec_whole": True}), ("tvjpeg", {}), ("dali", {})]:
    try:
        cfg = PipelineConfig(source=src, image_size=224, batch_size=256, device="cuda", dtype="bfloat16",
                             channels_last=True, num_workers=3, **extra)
        with pipelines.build(name, cfg) as p:
            it = iter(p); x, y = next(it); torch.cuda.synchronize()
            t = time.perf_counter(); n = 0
            for x, y in it:
                n += len(y)
            torch.cuda.synchronize(); dt = time.perf_counter() - t
            print(f"{name} {extra}: {n/dt:,.0f} img/s idle GPU (one epoch less its first batch), batch {tuple(x.shape)} {x.dtype} "
                  f"mean {x.float().mean().item():.3f} labels {int(y.min())}-{int(y.max())}", flush=True)
    except Exception as e:
        import traceback; traceback.print_exc(); print(f"{name} {extra}: FAILED {e}", flush=True)
