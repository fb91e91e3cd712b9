"""Crop + flip + normalize in one pass (`crop_normalize`: uint8 NHWC in, contract images out; one
compiled kernel on CUDA, checked once against the op-by-op version), `normalize` alone, the
host-side crop windows (`crop_windows`) of the pipelines that crop on the host, and the batched
resize of photographs' boxes (`resized_crops`: every image of a batch padded into one tensor and
resized by two batched matrix products with PIL's antialiased filter as weights, on the images'
device; `tvjpeg` and `torchcodec` run it on their producer thread).
"""
from __future__ import annotations

import os
import warnings
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
import torch

from .config import MEAN, STD, PipelineConfig
from .epochs import draw_augmentation

def crop_windows(images: np.ndarray, size: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Strided views [i, dy, dx] -> the size x size x C crop at (dy, dx) of zero-padded NHWC image
    i, of the images and of their mirror images (a flipped crop at dx is the mirror's crop at
    2 * pad - dx): numpy fancy indexing over them gathers a batch of crops in one copy."""
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    return tuple(sliding_window_view(p, (size, size), axis=(1, 2)).transpose(0, 1, 2, 4, 5, 3)
                 for p in (padded, padded[:, :, ::-1]))


def compile_in_process(function: Callable) -> Callable:
    """`torch.compile(function)` whose compilations, later recompilations too, run in this process
    (inductor's `compile_threads` set to 1 for the process): inductor's pool of compile worker
    processes, its default, would hold about a core for seconds after a warm-cache compile, inside
    timed windows (results/2026-11-24-h100-compile-workers/). Unless the process's environment sets
    inductor's own TORCHINDUCTOR_COMPILE_THREADS: a run that only fills inductor's cache, timing
    nothing, compiles on that many (`bench/plans/on-gpu.sh`; the cache's key leaves the count out)."""
    import torch._inductor.config as inductor
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        inductor.compile_threads = 1
    return torch.compile(function)


_AFFINE: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def affine(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift), 1 x 3 x 1 x 1 float32 on `device`: (x/255 - mean)/std = x * scale + shift."""
    if device not in _AFFINE:
        std = torch.tensor(STD, dtype=torch.float64)
        scale = (1 / (255 * std)).view(1, 3, 1, 1)
        shift = (-torch.tensor(MEAN, dtype=torch.float64) / std).view(1, 3, 1, 1)
        _AFFINE[device] = (scale.float().to(device), shift.float().to(device))
    return _AFFINE[device]


def normalize(images: torch.Tensor, config: PipelineConfig) -> torch.Tensor:
    """uint8 B x H x W x C (any device) -> contract images: (x/255 - mean)/std as B x C x H x W.

    One kernel: a fused multiply-add computed in float32, written straight into a tensor of
    config.dtype in the requested memory format (the permute itself is a free view).
    """
    scale, shift = affine(images.device)
    return _normalize(images, scale, shift, getattr(torch, config.dtype), config.channels_last)


def _normalize(images: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, dtype: torch.dtype,
               channels_last: bool) -> torch.Tensor:
    x = images.permute(0, 3, 1, 2)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    if torch.compiler.is_compiling():   # compiled, the layout is the output's: no out= buffer
        return torch.addcmul(shift, x, scale).to(dtype).contiguous(memory_format=layout)
    return torch.addcmul(shift, x, scale, out=torch.empty(x.shape, dtype=dtype, device=x.device, memory_format=layout))


def crop_normalize(images: torch.Tensor, index: torch.Tensor, draws: tuple[torch.Tensor, ...] | None,
                   config: PipelineConfig, start: int = 0) -> torch.Tensor:
    """Contract images of samples `images[index]` (`images`: N x S x S x C uint8, on the device
    of `index`): each cropped at (dy, dx) of its image zero-padded by `config.pad` and mirrored
    where `flip`, then normalized as `normalize` does. `draws`: the epoch's `epoch_draws` as
    `Uploader.draws` puts them on the device, of which these samples' are positions `start` to
    `start + len(index)`; None: no augmentation.

    Each output pixel is read straight from `images` (a pixel of the padding is a zero): nothing
    is padded, copied or indexed in between. On CUDA the function runs compiled (`torch.compile`)
    into one kernel, which `warm_crop_normalize` compiles for any number of images; elsewhere, or
    where compiling failed, it runs as written, op by op, with the same result."""
    n = len(index)
    dy, dx, flip = (d[start:start + n] for d in draws) if draws is not None else (None, None, None)
    return _apply(_COMPILED.get(images.device.type, _crop_normalize), images, index, dy, dx, flip, config)


def _apply(function: Callable, images, index, dy, dx, flip, config: PipelineConfig) -> torch.Tensor:
    """`function` (`_crop_normalize` or its compiled version) on these samples' images and draws."""
    scale, shift = affine(images.device)
    return function(images, index, dy, dx, flip, scale, shift, config.pad, getattr(torch, config.dtype),
                    config.channels_last)


def _crop_normalize(images, index, dy, dx, flip, scale, shift, pad: int, dtype: torch.dtype,
                    channels_last: bool) -> torch.Tensor:
    if dy is None:
        return _normalize(images[index], scale, shift, dtype, channels_last)
    size = images.shape[1]
    ramp = torch.arange(size, device=images.device)
    rows = dy[:, None] + (ramp - pad)                                                 # B x S
    cols = dx[:, None] + (torch.where(flip[:, None] != 0, ramp.flip(0), ramp) - pad)  # B x S
    inside = ((rows >= 0) & (rows < size))[:, :, None, None] & ((cols >= 0) & (cols < size))[:, None, :, None]
    pixels = images[index[:, None, None], rows.clamp(0, size - 1)[:, :, None], cols.clamp(0, size - 1)[:, None, :]]
    return _normalize(pixels * inside, scale, shift, dtype, channels_last)


_COMPILED: dict[str, Callable] = {}   # device type -> the compiled _crop_normalize, or the op-by-op one


def warm_crop_normalize(device: torch.device, config: PipelineConfig, planar: bool = False) -> None:
    """Compile `crop_normalize` for `config` now, for any number of images (the batch dimension
    marked dynamic: one compile, seconds, once per process and configuration), and check it
    against the op-by-op version; if compiling fails, warn and keep the op-by-op version. Called
    by the constructors, so no epoch and no producer thread compiles. `planar`: the images will
    be N x C x S x S tensors seen as N x S x S x C (a decoder's output; each memory layout is
    compiled apart).

    The kernel compiles in this process (`compile_in_process`): otherwise inductor starts its pool
    of compile worker processes, which import torch on the cores the loader runs on for seconds
    after the compile is over; with a budget of two cores that took about one of them from
    `prefetch` (results/2026-11-24-h100-compile-workers/)."""
    if device.type != "cuda" or _COMPILED.get("cuda") is _crop_normalize:
        return
    _COMPILED.setdefault("cuda", compile_in_process(_crop_normalize))
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, config.image_size, config.image_size, 3), dtype=torch.uint8, generator=generator)
    if planar:
        images = images.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)
    index = torch.tensor([5, 1, 2, 0])
    draws = tuple(d.long() for d in draw_augmentation(4, config.pad, generator)) if config.augment else None
    want = crop_normalize(images, index, draws, config)
    on_device = [images.to(device), index.to(device),
                 *(tuple(d.to(device) for d in draws) if draws is not None else (None, None, None))]
    for tensor in on_device:   # marked on the very tensors the compiled function gets (a slice is unmarked)
        if tensor is not None:
            torch._dynamo.mark_dynamic(tensor, 0)
    try:
        got = _apply(_COMPILED["cuda"], *on_device, config).cpu()
    except Exception as error:   # no compiler here: the op-by-op version, slower, same result
        warnings.warn(f"crop_normalize could not be compiled, it runs op by op: {type(error).__name__}: "
                      f"{(str(error).splitlines() or [''])[0]}", stacklevel=2)
        _COMPILED["cuda"] = _crop_normalize
        return
    ulp = 2.0 ** -6 if config.dtype == "bfloat16" else 1e-5   # one rounding apart (bfloat16 below 4: 2^-6)
    if (got.float() - want.float()).abs().max() > ulp:
        raise RuntimeError("crop_normalize: the compiled kernel disagrees with the op-by-op version")


def resized_crops(images: list[torch.Tensor], boxes: torch.Tensor, size: int,
                  dtype: torch.dtype | None = None) -> torch.Tensor:
    """Photographs (each 3 x H x W uint8, any sizes, one device) -> B x size x size x 3 uint8: each
    image's box cut, resized with antialiased bilinear interpolation (PIL's filter, as
    `torchvision.transforms.functional.resized_crop` applies it), mirrored where drawn, rounded.
    `boxes`: 5 x B int64 (y, x, h, w, flip) on the images' device; `dtype`: what the resize
    computes in (default: float16 on CUDA, float32 elsewhere).

    One batched resize, no loop over images: the images zero-padded into one B x 3 x Hmax x Wmax
    tensor of `dtype`, then out = rows @ images @ cols^T, two batched
    matrix products whose B x size x Hmax and B x size x Wmax weights hold each output pixel's
    filter taps (`resize_weights`: zero outside the box, so the padding never leaks in; a flip
    reverses the rows of `cols`). The filter is the one PIL and `interpolate(antialias=True)` use,
    so the result is that per-image resize up to float rounding: tests/test_tvjpeg.py holds it
    within one level of it (and of PIL, which rounds to uint8 between its two passes). Memory: the
    padded batch, for 256 photographs of up to 800 x 800 px in float16 256 x 3 x 800 x 800 x 2
    bytes, about 1 GB on the device while the batch is resized. `torchvision.ops.roi_align`
    (adaptive sampling) is no substitute: its average of a few bilinear samples per output pixel
    is a box-like filter, not PIL's triangle, and far off it at sharp edges."""
    dtype = dtype or (torch.float16 if images[0].is_cuda else torch.float32)
    padded = _padded(images, dtype)
    y, x, h, w, flip = boxes
    rows = resize_weights(y, h, size, padded.shape[2], dtype)
    cols = resize_weights(x, w, size, padded.shape[3], dtype)
    cols = torch.where(flip[:, None, None] != 0, cols.flip(1), cols)
    out = rows[:, None] @ padded @ cols[:, None].transpose(-1, -2)
    return out.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def _padded(images: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """Images of any sizes -> one zero-padded B x C x Hmax x Wmax tensor of `dtype` (a nested
    tensor's padding: a few launches, not one copy per image)."""
    return torch.nested.as_nested_tensor(images, dtype=dtype).to_padded_tensor(0.0)


def warm_padded() -> None:
    """Nested tensors are a prototype API that warns once per process: take that warning now,
    silenced. Called by constructors, before any producer thread runs (`warnings.catch_warnings` is
    not thread-safe)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _padded([torch.zeros(1, 1, 1, dtype=torch.uint8)], torch.float32)


def resize_weights(start: torch.Tensor, length: torch.Tensor, size: int, extent: int,
                   dtype: torch.dtype) -> torch.Tensor:
    """B x size x extent: row o of b holds the weights that antialiased bilinear resizing of pixels
    start[b] .. start[b] + length[b] - 1 of an axis of `extent` pixels to `size` gives each pixel
    for output o: PIL's triangle filter, stretched by the scale where it shrinks, centred on the
    output pixel's centre, cut to the box and normalized to sum 1. Computed in float32 (positions
    up to thousands of pixels), returned as `dtype`."""
    start, length = start.float()[:, None, None], length.float()[:, None, None]
    scale = length / size
    support = scale.clamp(min=1.0)
    centre = start + (torch.arange(size, device=start.device, dtype=torch.float32)[None, :, None] + 0.5) * scale
    pixel = torch.arange(extent, device=start.device, dtype=torch.float32)[None, None, :]
    weights = (pixel + 0.5 - centre).abs_().div_(support).neg_().add_(1).clamp_(min=0)   # in place: B x size x extent
    weights *= (pixel >= start) & (pixel < start + length)
    return weights.div_(weights.sum(-1, keepdim=True)).to(dtype)
