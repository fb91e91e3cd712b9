# runs at commit 4720982f52a2
"""Why the busy step ran 2-5 % longer beside a pipeline than its label (results/2026-11-25-h100-instrument):
the calibration's copies stayed in the L2 cache. For a copy ring of 1 buffer (the earlier design) and of
bench.busy.COPY_RING buffers, calibrate, then time a 2-ms step's mean over 48 replays with the cache warm
(back to back) and cold (a 256 MiB write, a pipeline's traffic, before each step).

    PYTHONPATH=. python results/2026-11-26-h100-instrument/cold_cache.py
"""
import torch

from bench import busy

device = torch.device("cuda")
traffic = torch.empty(2**27, device=device, dtype=torch.int16)
print(f"{torch.cuda.get_device_name(device)}, L2 {torch.cuda.get_device_properties(device).L2_cache_size / 2**20:.0f} MiB")
for ring in (1, busy.COPY_RING):
    busy.COPY_RING = ring
    busy._WORK.clear()
    step = busy.BusyStep(device, 2.0)
    for cold in (False, True):
        step.measured_ms()
        for _ in range(48):
            if cold:
                traffic.fill_(1)
            step()
        mean = step.measured_ms()
        print(f"copy ring {ring} x {busy.COPY_BYTES >> 20} MiB, unit {busy.work(device).unit_ms * 1e3:.1f} us, "
              f"{'cold' if cold else 'warm'} cache: mean step {mean:.3f} ms of a 2-ms label ({mean / 2 - 1:+.1%})")
