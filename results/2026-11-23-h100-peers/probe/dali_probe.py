"""Exploratory probe (not part of the project): what limits DALI at 32 px, and which structure is faster.

# runs at commit 386759ed566a
It imports helpers that `pipelines.base` had at that commit (crop_grid, gather_crops, pad_images);
run it from a checkout of it: `git worktree add /tmp/probe 386759ed566a`, then from /tmp/probe.

Loader-only img/s of DALI graph variants on the synthetic train split's JPEG copy, contract batch 512.
"""
import argparse
import sys
import time

import numpy as np
import torch
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.pytorch import DALIGenericIterator

import pipelines
from pipelines import sources
from pipelines.base import crop_grid, draw_augmentation, epoch_batches, gather_crops, normalize, pad_images
from pipelines.config import PipelineConfig

DEV = torch.device("cuda")
BS = 512


class Source:
    def __init__(self, jpeg, n, dali_bs, fixed=False, dense_raw=None):
        self.jpeg, self.n, self.dali_bs, self.fixed, self.raw = jpeg, n, dali_bs, fixed, dense_raw
        self.epoch, self.order = None, None

    def __call__(self, info):
        if self.epoch != info.epoch_idx:
            self.epoch = info.epoch_idx
            self.order = np.random.default_rng([0, self.epoch]).permutation(self.n)
            self.steps = self.n // self.dali_bs
        if info.iteration >= self.steps:
            raise StopIteration
        i = 0 if self.fixed else info.iteration
        index = self.order[i * self.dali_bs:(i + 1) * self.dali_bs]
        if self.raw is not None:
            return [self.raw[index]]
        return [[self.jpeg[j] for j in index]]


def graph(src, dali_bs, threads, depth, huff=None, hw=0.0, raw=False, cpu=False, legacy=False):
    extra = {} if huff is None else {"hybrid_huffman_threshold": huff}

    @pipeline_def(batch_size=dali_bs, num_threads=threads, device_id=0, prefetch_queue_depth=depth, seed=1)
    def g():
        enc, = fn.external_source(source=src, num_outputs=1, batch=True, batch_info=True)
        if raw:
            return enc.gpu()
        dec = fn.legacy.decoders.image if legacy else fn.decoders.image
        if cpu:
            return dec(enc, device="cpu", output_type=types.RGB).gpu()
        if legacy:
            return dec(enc, device="mixed", output_type=types.RGB, hw_decoder_load=hw, **extra)
        return fn.decoders.image(enc, device="mixed", output_type=types.RGB, hw_decoder_load=hw, **extra)
    return g()


def measure_iter(make_batches, seconds, warm=20):
    """make_batches(): infinite iterator of (images, labels) on DEV; img/s over >= seconds."""
    it = make_batches()
    acc = torch.zeros((), device=DEV)
    for _ in range(warm):
        x, y = next(it)
        acc += x[-1, -1, -1, -1].float()
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while True:
        x, y = next(it)
        acc += x[-1, -1, -1, -1].float()
        n += len(x)
        if n % (BS * 20) == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - t0 >= seconds:
                break
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def decode_only(jpeg, labels, dali_bs, threads, depth, huff=None, hw=0.0, fixed=False, pipes=1, raw=None,
                augment=True, cpu=False, kinds=None, legacy=False):
    """DALI decodes (mixed) dense uint8 HWC batches of dali_bs; torch splits into 512s, crops/flips with one
    gather kernel and normalizes. pipes > 1: round robin over several DALI pipelines."""
    n = len(labels)
    lab = torch.from_numpy(labels).to(DEV)
    cfg = PipelineConfig(device="cuda", dtype="bfloat16", channels_last=True, batch_size=BS)

    def gen():
        ks = kinds or [(cpu, threads)] * pipes
        srcs = [Source(jpeg, n, dali_bs, fixed, raw) for _ in ks]
        ps = [graph(s, dali_bs, t, depth, huff, hw, raw=raw is not None, cpu=c, legacy=legacy) for s, (c, t) in zip(srcs, ks)]
        its = [DALIGenericIterator([p], ["images"], size=-1, auto_reset=True, prepare_first_batch=False) for p in ps]
        epoch = 0
        while True:
            k = 0
            streams = [iter(i) for i in its]
            while True:
                try:
                    out = next(streams[k % len(ks)])
                except StopIteration:
                    break
                k += 1
                u8 = out[0]["images"]
                order = torch.arange(len(u8), device=DEV)
                if augment:
                    g = torch.Generator(device=DEV).manual_seed(epoch * 1000 + k)
                    rows, cols = crop_grid(*draw_augmentation(len(u8), 4, g, DEV), 32)
                    padded = pad_images(u8, 4)
                for s in range(0, len(u8), BS):
                    if augment:
                        px = gather_crops(padded, order[s:s + BS], rows[s:s + BS], cols[s:s + BS])
                    else:
                        px = u8[s:s + BS]
                    yield normalize(px, cfg), lab[:BS]
            epoch += 1
    return gen


def harness_loader(name, seconds, **changes):
    from bench import harness
    cfg = PipelineConfig(device="cuda", dtype="bfloat16", channels_last=True, batch_size=BS, last_batch="drop",
                         **changes)
    spec = harness.RunSpec(name, "loader", "none", cfg, steps=None, min_seconds=seconds, warmup=10, repeats=2)
    return [w.images / w.seconds for _, w in harness.run(spec)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    cfg = PipelineConfig(encoding="jpeg")
    split = sources.open_split(cfg)
    jpeg, labels, raw = split.jpeg, split.labels, split.images
    n = len(labels)
    # callback cost alone
    src = Source(jpeg, n, BS)
    from types import SimpleNamespace
    t0 = time.perf_counter()
    for i in range(n // BS):
        src(SimpleNamespace(epoch_idx=0, iteration=i))
    cb = (n // BS * BS) / (time.perf_counter() - t0)
    print(f"callback alone (list of {BS} views/batch): {cb:,.0f} img/s", flush=True)
    T = 15
    variants = [
        ("legacy cpu b2048 t15", dict(dali_bs=2048, threads=T, depth=4, cpu=True, legacy=True)),
        ("legacy cpu b512 t15", dict(dali_bs=512, threads=T, depth=4, cpu=True, legacy=True)),
        ("legacy mixed b2048 t15", dict(dali_bs=2048, threads=T, depth=4, legacy=True)),
        ("legacy mixed b512 t15", dict(dali_bs=512, threads=T, depth=4, legacy=True)),
        ("legacy mixed b2048 t15 huff0", dict(dali_bs=2048, threads=T, depth=4, legacy=True, huff=0)),
        ("mix cpu t10 + gpu t5 b2048", dict(dali_bs=2048, threads=0, depth=4, kinds=[(True, 10), (False, 5)])),
        ("mix cpu t12 + gpu t3 b2048", dict(dali_bs=2048, threads=0, depth=4, kinds=[(True, 12), (False, 3)])),
        ("mix 2cpu t6 + gpu t3 b2048", dict(dali_bs=2048, threads=0, depth=4, kinds=[(True, 6), (False, 3), (True, 6)])),
        ("mix cpu t14 + gpu t2 b2048", dict(dali_bs=2048, threads=0, depth=4, kinds=[(True, 14), (False, 2)])),
        ("cpu-decode b512 t15 q4", dict(dali_bs=512, threads=T, depth=4, cpu=True)),
        ("cpu-decode b2048 t15 q4", dict(dali_bs=2048, threads=T, depth=4, cpu=True)),
        ("cpu-decode b2048 t12 q4", dict(dali_bs=2048, threads=12, depth=4, cpu=True)),
        ("cpu-decode b1024 t15 q4", dict(dali_bs=1024, threads=T, depth=4, cpu=True)),
        ("harness dali (current)", lambda: harness_loader("dali", a.seconds)),
        ("harness dali-raw (current)", lambda: harness_loader("dali-raw", a.seconds)),
        ("decode-only b512 t15 q4", dict(dali_bs=512, threads=T, depth=4)),
        ("decode-only b512 t15 q4 no-aug", dict(dali_bs=512, threads=T, depth=4, augment=False)),
        ("decode-only b512 t15 q4 fixed-batch", dict(dali_bs=512, threads=T, depth=4, fixed=True)),
        ("raw-only (no decode) b512 t15 q4", dict(dali_bs=512, threads=T, depth=4, raw=raw)),
        ("raw-only (no decode) b2048 t15 q4", dict(dali_bs=2048, threads=T, depth=4, raw=raw)),
        ("decode-only b1024 t15 q4", dict(dali_bs=1024, threads=T, depth=4)),
        ("decode-only b2048 t15 q4", dict(dali_bs=2048, threads=T, depth=4)),
        ("decode-only b4096 t15 q3", dict(dali_bs=4096, threads=T, depth=3)),
        ("decode-only b512 huff0", dict(dali_bs=512, threads=T, depth=4, huff=0)),
        ("decode-only b2048 huff0", dict(dali_bs=2048, threads=T, depth=4, huff=0)),
        ("decode-only b2048 t8", dict(dali_bs=2048, threads=8, depth=4)),
        ("decode-only b2048 hw0.5", dict(dali_bs=2048, threads=T, depth=4, hw=0.5)),
        ("decode-only 2 pipes b1024 t7", dict(dali_bs=1024, threads=7, depth=4, pipes=2)),
        ("decode-only 2 pipes b2048 t7", dict(dali_bs=2048, threads=7, depth=4, pipes=2)),
        ("decode-only 3 pipes b2048 t5", dict(dali_bs=2048, threads=5, depth=3, pipes=3)),
    ]
    files = [torch.from_numpy(jpeg[i]) for i in range(n)]

    def nv_decode(decode, bs):
        def gen():
            while True:
                order = np.random.default_rng(0).permutation(n)
                for s in range(0, n - bs + 1, bs):
                    out = decode([files[i] for i in order[s:s + bs]])
                    u8 = torch.stack(out).permute(0, 2, 3, 1)
                    for k in range(0, bs, BS):
                        yield u8[k:k + BS], None
        return gen

    def tc(batch):
        from torchcodec.decoders import decode_jpeg as tcd
        return lambda files: tcd(files, mode="RGB", device="cuda")

    def tv(batch):
        from torchvision.io import ImageReadMode, decode_jpeg as tvd
        return lambda files: tvd(files, mode=ImageReadMode.RGB, device="cuda")

    for lib, make in (("torchcodec", tc), ("torchvision", tv)):
        for bs in (512, 2048):
            if a.only and a.only not in lib:
                continue
            try:
                rates = [measure_iter(nv_decode(make(bs), bs), a.seconds, warm=4) for _ in range(2)]
                print(f"{lib + ' decode_jpeg cuda b' + str(bs):45s} " + "  ".join(f"{r:,.0f}" for r in rates), flush=True)
            except Exception as e:
                print(f"{lib} b{bs} FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    for name, v in variants:
        if a.only and a.only not in name:
            continue
        try:
            if callable(v):
                rates = v()
            else:
                rates = [measure_iter(decode_only(jpeg, labels, **v), a.seconds) for _ in range(2)]
            print(f"{name:45s} " + "  ".join(f"{r:,.0f}" for r in rates), flush=True)
        except Exception as e:
            print(f"{name:45s} FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
