# runs at commit 4720982f52a2
"""DataParallel with and without cuDNN autotuning, ResNet-18, model only (run on a host with 2 NVIDIA H200 GPUs:
`PYTHONPATH=$PWD python3 results/2026-11-22-h200-multi-gpu/x2/dp-probe.py`). Output: dp-probe.txt."""
import time

import torch

from bench.harness import Trainer
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
print(torch.cuda.device_count(), "GPUs; peer 0->1:", torch.cuda.can_device_access_peer(0, 1))
for cl, prec, par, bench in [(True, "bfloat16", "dp", False), (True, "bfloat16", "dp", True)]:
    bs = 512 * (2 if par == "dp" else 1)
    t = Trainer("resnet18", dev, prec, cl, parallel=par)
    torch.backends.cudnn.benchmark = bench
    x = torch.randn(bs, 3, 32, 32, device=dev)
    x = x.contiguous(memory_format=torch.channels_last) if cl else x
    y = torch.randint(0, 10, (bs,), device=dev)
    for _ in range(5): t(x, y)
    torch.cuda.synchronize(); s = time.perf_counter()
    for _ in range(10): t(x, y)
    torch.cuda.synchronize(); dt = (time.perf_counter() - s) / 10
    print(f"benchmark={bench} channels_last={cl} {prec} {par}: {bs/dt:,.0f} img/s ({dt*1e3:.1f} ms/step)", flush=True)
