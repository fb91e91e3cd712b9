"""`nvimgcodec`: GPU decoding the suite drives itself, NVIDIA's nvImageCodec (the codec library DALI
2.x decodes with) called from `tvjpeg`'s producer thread on its high-priority side stream.

Bytes: exactly as `tvjpeg` (this pipeline is `tvjpeg` with the decode call swapped): the packed JPEG
copy in host memory, one nvImageCodec code stream per file made once (a view of its bytes, header
parsed) -> on `tvjpeg`'s producer thread, a few batches ahead of the consumer, per batch one
batched `Decoder.decode` ordered on the side stream (`cuda_stream`: its outputs are ready where the
side stream's later work runs), `nvimgcodec_hw_load` of the files on the hardware JPEG engine, the
rest on nvImageCodec's CUDA decoder, its CPU work on `num_workers` threads of its own -> every
photograph's box (RandomResizedCrop's, drawn as every pipeline draws it) resized to S x S, mirrored
where drawn, in one batched resize (`kernels.resized_crops`) -> normalize -> an event the consumer's
stream waits on. CIFAR's files are cropped by the shared gather, as `tvjpeg` does. Whole files are
decoded, not the box alone: region-of-interest decoding (`CodeStream.get_sub_code_stream(region=)`)
ran about a fifth as fast as whole files on an idle H200 (CUDA 13.0's nvJPEG, 3 threads:
results/2026-12-02-h200-gpu-decode/smoke.txt), and nvImageCodec warns that before nvJPEG 13.2 it
may get the box's edge pixels wrong.

Why it exists (issue 68): GPU decoders fall far below their idle rate beside a compiled ResNet-50
step; DALI's streams run at the default priority whatever the pipeline asks (DALI 2.4 ignores
`default_cuda_stream_priority`), and torchvision's `decode_jpeg` decodes on a default-priority
stream of torch's pool and waits on the host for it. Here the decode is ordered on the producer's
high-priority stream, and nvImageCodec's own library is called without DALI around it. What that
gave (results/2026-12-02-h200-gpu-decode/README.md): no more than `tvjpeg` beside the step. The
`cuda_stream` only orders the outputs: nvImageCodec decodes on CUDA streams of its own (its
`Decoder` takes `:num_cuda_streams=N`), whose priority this pipeline does not set.

Lanes (`nvimgcodec_lanes`, issue 68): the decode call waits on the host for its batch, and beside a
busy step that wait grows (results/2026-12-02-h200-gpu-decode: the decode call, synchronous on the
producer's path, stretched by about two thirds while the JPEG engine stayed mostly idle). With N
lanes, N producer threads each decode every N-th batch with a Decoder and a side stream of their
own, so one batch's wait overlaps the others' decodes; the batches are handed over in order, the
same as with one lane. The cores' decode threads (`num_workers`) are shared among the decoders.

Without a GPU the same thread decodes on the CPU (nvImageCodec's libjpeg-turbo backend).

Needs nvImageCodec (`nvidia-nvimgcodec-cu12` / `-cu13`, which DALI installs: `pip install -e
'.[dali]'`); without it the pipeline is unavailable with that reason.
"""
from __future__ import annotations

import threading

import numpy as np
import torch

from .options import NUM_WORKERS, Option
from .peers import Peer
from .tvjpeg import TorchvisionJpegPipeline


def _import_nvimgcodec():
    from nvidia import nvimgcodec
    return nvimgcodec


NVIMGCODEC = Peer(_import_nvimgcodec, lambda e: f"nvImageCodec is not installed or cannot load: pip install -e "
                  f"'.[dali]' ({e})", errors=(ImportError, OSError, RuntimeError))

HW_LOAD = Option("nvimgcodec_hw_load", 1.0, "share of each batch's JPEGs for the hardware JPEG decoder; the rest "
                 "on nvImageCodec's CUDA decoder", kind=float, low=0.0, high=1.0, listed=True)
LANES = Option("nvimgcodec_lanes", 1, "batches decoded at once, each by a producer thread with a decoder and a "
               "side stream of its own (the cores' decode threads shared among them)", low=1, high=8, listed=True)


class NvimgcodecJpegPipeline(TorchvisionJpegPipeline):
    name = "nvimgcodec"
    missing = NVIMGCODEC
    options = (NUM_WORKERS, HW_LOAD, LANES)

    def __init__(self, config, data=None):
        super().__init__(config, data)
        codec = NVIMGCODEC.get()
        self.code_streams = [codec.CodeStream(self.data.jpeg[i]) for i in range(len(self.data.jpeg))]
        threads = max(1, (self.config.num_workers or 1) // self.lanes)
        if self.cuda:
            load = self.config.nvimgcodec_hw_load
            backends = [codec.Backend(codec.HW_GPU_ONLY, load_hint=load), codec.Backend(codec.GPU_ONLY),
                        codec.Backend(codec.CPU_ONLY)]
            made = lambda: codec.Decoder(device_id=self.device.index or 0, max_num_cpu_threads=threads,   # noqa: E731
                                         backends=backends)
        else:
            made = lambda: codec.Decoder(device_id=codec.NVIMGCODEC_DEVICE_CPU_ONLY,   # noqa: E731
                                         max_num_cpu_threads=threads, backends=[codec.Backend(codec.CPU_ONLY)])
        self.decoders = [made() for _ in range(self.lanes)]   # one per lane
        self.params = codec.DecodeParams(apply_exif_orientation=False, color_spec=codec.ColorSpec.SRGB,
                                          sample_format=codec.SampleFormat.P_RGB)   # 3 x H x W, as tvjpeg's
        self.locks = [threading.Lock() for _ in range(self.lanes)]   # one decode call per decoder at a time
        self.mine = threading.local()   # each thread's last batch of images, decoded into again

    @property
    def lanes(self) -> int:
        return self.config.nvimgcodec_lanes

    def decode_files(self, files, index, lane: int = 0) -> list[torch.Tensor]:
        return self._decoded([self.code_streams[i] for i in index], lane)

    def _decoded(self, sources, lane: int) -> list[torch.Tensor]:
        """One batched decode by the lane's decoder, ordered on the current (side) stream -> 3 x H x W
        uint8 images. The calling thread's previous batch is decoded into again (buffers grow as
        needed, never freed mid-run): a lane's producer starts a batch only once its side stream
        finished the last one, and `stages().device` on the caller's thread orders its decode after
        its own last use (two threads decoding into the same images hung both in nvImageCodec 0.9's
        CPU backend). A decoder takes one call at a time: nvImageCodec's guide says not all of its
        types are thread safe."""
        stream = torch.cuda.current_stream(self.device).cuda_stream if self.cuda else 0
        last = getattr(self.mine, "images", [])
        with self.locks[lane]:
            images = self.decoders[lane].decode(sources, images=last if len(last) == len(sources) else None,
                                                params=self.params, cuda_stream=stream)
        if any(image is None for image in images):
            raise RuntimeError("nvImageCodec could not decode a file of this batch")
        self.mine.images = images
        if self.cuda:
            return [torch.as_tensor(image, device=self.device) for image in images]
        return [torch.from_numpy(np.asarray(image)) for image in images]

    def _release(self) -> None:
        super()._release()
        self.mine, self.code_streams = threading.local(), []
