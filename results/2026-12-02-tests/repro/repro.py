"""Experiment: the issue's loop at scale. python repro.py NAME ORDER COMPILE"""
import sys, time, pathlib
import numpy as np, torch, torch.nn.functional as F, torchvision
from PIL import Image
import pipelines
name, order, comp = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
variant = sys.argv[4] if len(sys.argv) > 4 else "resnet"
root = pathlib.Path("/tmp/repro-photos")
if not (root / "done").exists():
    rng = np.random.default_rng(0)
    for k in range(1536):
        h, w = (int(v) for v in rng.integers(300, 500, 2))
        small = Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8))
        p = root / f"class{k % 10}" / f"{k}.jpg"; p.parent.mkdir(parents=True, exist_ok=True)
        small.resize((w, h), Image.Resampling.BICUBIC).save(p, quality=90)
    (root / "done").touch()
B = int(sys.argv[5]) if len(sys.argv) > 5 else 256
cfg = pipelines.PipelineConfig(source=f"imagefolder:{root}", image_size=224, batch_size=B, device="cuda",
                               dtype="bfloat16", channels_last=True, num_workers=15, cache_root="/tmp/repro-cache")
torch.backends.cudnn.benchmark = True
def make_step():
    model = torchvision.models.resnet50(num_classes=10).cuda().to(memory_format=torch.channels_last)
    fwd = torch.compile(model) if comp else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs = torch.randn(B, 3, 224, 224, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    ys = torch.zeros(B, dtype=torch.long, device="cuda")
    work = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    def step():
        if variant == "busy":
            for _ in range(100): torch.mm(work, work, out=work.new_empty(work.shape))
            return (ys + 0).float().mean()
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = F.cross_entropy(fwd(xs), ys)
        loss.backward(); opt.step()
        return loss
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True); step()
    torch.cuda.current_stream().wait_stream(s)
    opt.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = step()
    return g, xs, ys, loss
t0 = time.time()
if order == "before":
    p = pipelines.build(name, cfg)
g, xs, ys, loss = make_step()
if order == "after":
    p = pipelines.build(name, cfg)
seen_bad = 0
for epoch in range(2):
    p.set_epoch(epoch)
    want = np.concatenate([p.data.labels[i] for i in p.batches()])
    got = []
    t = time.time()
    for images, labels in p:
        if variant == "eager":
            xs.copy_(images); ys.copy_(labels); opt_step = None; got.append(ys.clone()); continue
        xs.copy_(images); ys.copy_(labels); got.append(labels.clone()); g.replay()
    got = torch.cat(got).cpu().numpy()
    print("first batch labels got ", got[:16], "want", want[:16])
    for b in range(len(got) // B):
        print(f"batch {b}: {int((got[b*B:(b+1)*B] != want[b*B:(b+1)*B]).sum())} differ; got {got[b*B:b*B+8]} want {want[b*B:b*B+8]}")
    table = p.labels.cpu().numpy() if hasattr(p, "labels") else None
    if table is not None: print("label table intact:", bool((table == p.data.labels).all()), "ptr", hex(p.labels.data_ptr()))
    if "order" in p.uploads.buffers:
        o = p.uploads.buffers["order"][:len(want)].cpu().numpy(); print("order buffer intact:", bool((o == np.concatenate(p.batches())).all()), "ptr", hex(p.uploads.buffers["order"].data_ptr()))
    print(f"{name} {order} compile={comp} epoch {epoch}: {len(got)} labels, {int((got != want).sum())} differ, "
          f"{len(got) / (time.time() - t):.0f} img/s, loss {loss.item():.3f}", flush=True)
p.close()
