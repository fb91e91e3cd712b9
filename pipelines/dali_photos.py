"""The `dali` pipeline's graph on photographs (`source="imagefolder:PATH"`, `pipelines.dali`), in the two
setups it runs:

- `dali_reader="external"` / `"parallel"` (the default): the external source hands DALI each file with
  the box and flip every pipeline draws (`crops`) -> `fn.decoders.image_slice` decodes the box only
  (region-of-interest decoding) -> `fn.resize` to S x S on the GPU (antialiased linear) ->
  `fn.crop_mirror_normalize` mirrors where the flip says and normalizes (`boxes_graph`);
- `dali_reader="file"`: DALI set up as NVIDIA's ResNet-50 example sets it up (NVIDIA/DALI,
  docs/examples/use_cases/pytorch/resnet50/main.py): `fn.readers.file` reads the files from the
  folder with their labels -> `fn.decoders.image_random_crop` draws and decodes the crop itself
  (DALI's random numbers; the area and aspect ranges the other pipelines draw from, `crops.SCALE` and
  `crops.RATIO`, in place of the example's 0.1-1 and 0.8-1.25, so that every pipeline decodes crops of
  the same sizes; 100 attempts as the example) -> `fn.resize` to S x S (triangular, the example's) ->
  `fn.crop_mirror_normalize` with `fn.random.coin_flip` as the mirror (`random_crop_graph`). Eval: the
  whole file decoded, its shorter side resized to 256 and the centre 224 cut, as the example does.

Both decode with "mixed" (nvJPEG, with the example's memory padding and the hardware decoder's buffers
preallocated for the set's largest photograph, `dali_hw_decoder_load` of the files on the hardware JPEG
engine) or "cpu" (libjpeg-turbo on DALI's threads, the pixels then copied to the GPU), and normalize into
the contract's layout (HWC seen as channels_last, or CHW) as float32, or float16 for a bfloat16 contract
(DALI has no bfloat16); `contract_images` makes them torch's in the contract's dtype, a split's two
parts (`dali_cpu_share`) concatenated.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import torch

from .config import MEAN, STD, PipelineConfig
from .crops import CROP, RATIO, RESIZE, SCALE

# NVIDIA's ResNet-50 example's nvJPEG memory padding (its ImageNet's largest sample), in bytes
DEVICE_MEMORY_PADDING, HOST_MEMORY_PADDING = 211025920, 140544512
ATTEMPTS = 100   # the example's random-crop attempts


def decoder_args(config: PipelineConfig, sizes: np.ndarray, mixed: bool) -> dict:
    """The photo decoder's arguments: "mixed" as NVIDIA's ResNet-50 example sets nvJPEG up (its memory
    padding; the hardware decoder's buffers preallocated for the largest of `sizes`, N x (height,
    width)), with `dali_hw_decoder_load`; else libjpeg-turbo."""
    if not mixed:
        return dict(device="cpu")
    height, width = (int(side) for side in sizes.max(axis=0))
    return dict(device="mixed", hw_decoder_load=config.dali_hw_decoder_load,
                device_memory_padding=DEVICE_MEMORY_PADDING, host_memory_padding=HOST_MEMORY_PADDING,
                preallocate_width_hint=width, preallocate_height_hint=height)


def _normalized(dali: SimpleNamespace, config: PipelineConfig, images, mirror, crop: int | None = None):
    """uint8 images on the GPU (or CPU-only) -> mirrored where `mirror`, normalized into the layout and
    dtype DALI gives the contract; `crop`: the centred crop of that side first."""
    dtype = dali.types.FLOAT if config.dtype == "float32" else dali.types.FLOAT16
    return dali.fn.crop_mirror_normalize(images, dtype=dtype, output_layout="HWC" if config.channels_last else "CHW",
                                         mean=[255 * v for v in MEAN], std=[255 * v for v in STD], mirror=mirror,
                                         **({} if crop is None else dict(crop=(crop, crop))))


def boxes_graph(dali: SimpleNamespace, config: PipelineConfig, sizes: np.ndarray, cuda: bool, decoder: str,
                files, anchors, shapes, flips):
    """The external source's files -> contract images: each box (anchors (x, y), shapes (w, h)) decoded
    alone by `decoder`, resized to S x S, mirrored where flips is set, normalized (module docstring)."""
    mixed = cuda and decoder == "mixed"
    images = dali.fn.decoders.image_slice(files, anchors, shapes, output_type=dali.types.RGB,
                                          axis_names="WH", **decoder_args(config, sizes, mixed))
    if cuda and not mixed:
        images = images.gpu()
    images = dali.fn.resize(images, resize_x=config.image_size, resize_y=config.image_size, antialias=True)
    return _normalized(dali, config, images, flips)


def random_crop_graph(dali: SimpleNamespace, config: PipelineConfig, sizes: np.ndarray, cuda: bool, decoder: str,
                      files):
    """Files (from `fn.readers.file`) -> contract images, as NVIDIA's ResNet-50 example makes them
    (module docstring): DALI's own random crop and flip in training, the centre crop in eval."""
    mixed = cuda and decoder == "mixed"
    args = decoder_args(config, sizes, mixed)
    if config.augment:
        images = dali.fn.decoders.image_random_crop(files, output_type=dali.types.RGB, random_area=list(SCALE),
                                                    random_aspect_ratio=list(RATIO), num_attempts=ATTEMPTS, **args)
    else:
        images = dali.fn.decoders.image(files, output_type=dali.types.RGB, **args)
    if cuda and not mixed:
        images = images.gpu()
    if config.augment:
        images = dali.fn.resize(images, resize_x=config.image_size, resize_y=config.image_size,
                                interp_type=dali.types.INTERP_TRIANGULAR)
        return _normalized(dali, config, images, dali.fn.random.coin_flip(probability=0.5))
    images = dali.fn.resize(images, size=round(config.image_size * RESIZE / CROP), mode="not_smaller",
                            interp_type=dali.types.INTERP_TRIANGULAR)
    return _normalized(dali, config, images, False, crop=config.image_size)


def reader_files(paths: tuple[str, ...]) -> tuple[str, list[str]]:
    """(file_root, files relative to it) for `fn.readers.file` over photographs read from `paths`."""
    root = os.path.commonpath(paths) if len(paths) > 1 else os.path.dirname(paths[0])
    return root, [os.path.relpath(path, root) for path in paths]


def contract_images(parts: list[torch.Tensor], config: PipelineConfig) -> torch.Tensor:
    """DALI's photo outputs (a split's two parts, the CPU's first) -> one batch torch owns, made by one
    copy: the parts concatenated, DALI's float16 converted to bfloat16, HWC seen as channels_last."""
    parts = [part.permute(0, 3, 1, 2) for part in parts] if config.channels_last else parts
    return torch.cat(parts, out=torch.empty(
        (sum(len(part) for part in parts), *parts[0].shape[1:]), dtype=getattr(torch, config.dtype),
        device=parts[0].device, memory_format=torch.channels_last if config.channels_last else torch.contiguous_format))
