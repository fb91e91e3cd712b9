"""The knobs of the `dali` and `dali-raw` pipelines (`pipelines.options`), what they resolve to where
left unset, and the `dali_cpu_share` combinations refused; defaults from the tuning runs in
results/2026-11-21-h100-dali. Declared apart from the pipelines (`pipelines.dali`), as the callbacks
that feed their graphs are (`pipelines.dali_sources`); neither needs DALI.
"""
from __future__ import annotations

from .config import PipelineConfig
from .options import Option

READER = Option("dali_reader", "external", "external = fed the same shuffled batches as every other pipeline, read in "
                "DALI's thread; parallel = the same, read in --workers processes; file = DALI's own file reader over "
                "a JPEG file tree (photographs: their files, with DALI's own random crop, as NVIDIA's ResNet-50 "
                "example)", kind=str, choices=("external", "parallel", "file"))
DECODER = Option("dali_decoder", "mixed", "mixed = nvJPEG (GPU decode, Huffman on DALI's threads), cpu = "
                 "libjpeg-turbo on DALI's threads, then the pixels are copied", kind=str, choices=("mixed", "cpu"),
                 listed=True)
THREADS = Option("dali_threads", None, "DALI's CPU threads", low=1, high=256, none="the worker count", within=True)
QUEUE_DEPTH = Option("dali_queue_depth", 4, "DALI's prefetch queue depth (DALI batches)", low=1, high=64, within=True)
HW_DECODER_LOAD = Option("dali_hw_decoder_load", None, "share of JPEGs for the hardware decoder", kind=float,
                         low=0.0, high=1.0, none="0 for CIFAR's files, DALI's own 0.65 for photographs", listed=True)
PHOTO_HW_DECODER_LOAD = 0.65   # DALI's default
BATCH_MULTIPLE = Option("dali_batch_multiple", 4, "external / parallel reader on CIFAR's images: DALI runs batches "
                        "of this many training batches, which the pipeline splits (its fixed cost shared); "
                        "photographs: 1", low=1, high=64, within=True)
CPU_SHARE = Option("dali_cpu_share", 0.0, "photographs: share decoded by libjpeg-turbo on DALI's threads (of each "
                   "batch's files or of whole batches: dali_split), the rest by nvJPEG (dali_decoder mixed), in DALI "
                   "pipelines of their own: nvJPEG's a quarter of dali_threads, the CPU decoder's the rest; 0 = all "
                   "by dali_decoder", kind=float, low=0.0, high=1.0, listed=True)
SPLIT = Option("dali_split", "samples", "photographs, with dali_cpu_share: samples = every batch split between the two "
               "decoders (the batch rate stays one DALI pipeline's); batches = whole batches, that share of them "
               "decoded on the CPU, the rest by the nvJPEG pipelines in turn (beside a busy step no faster: their "
               "batch rates did not add up)",
               kind=str, choices=("samples", "batches"), listed=True)
GPU_PIPELINES = Option("dali_gpu_pipelines", 1, "photographs: nvJPEG DALI pipelines that decode whole batches in turn "
                       "(with dali_cpu_share: dali_split batches), side by side, sharing their threads (two made as many "
                       "batches a second as one beside a busy step)", low=1, high=8,
                       listed=True)


def resolved(config: PipelineConfig) -> PipelineConfig:
    """DALI's CPU threads follow the worker budget unless set (`dali_threads`); the hardware
    decoder's share is 0 for CIFAR's files (tuned: results/2026-11-21-h100-dali) and DALI's
    default for photographs unless set; photographs run one training batch per DALI batch."""
    if config.photos and config.dali_batch_multiple != 1:
        config = config.replace(dali_batch_multiple=1)
    if config.dali_threads is None:
        config = config.replace(dali_threads=max(1, config.num_workers))
    if config.dali_hw_decoder_load is None:
        config = config.replace(dali_hw_decoder_load=PHOTO_HW_DECODER_LOAD if config.photos else 0.0)
    return config


def refuse_share(name: str, config: PipelineConfig) -> None:
    """A one-line ValueError for a `dali_cpu_share` or `dali_gpu_pipelines` that pipeline `name` cannot
    run with `config`."""
    share, gpus = config.dali_cpu_share, config.dali_gpu_pipelines
    if share == 0 and gpus == 1:
        return
    knob = f"dali_cpu_share={share}" if share else f"dali_gpu_pipelines={gpus}"
    if not config.photos:
        raise ValueError(f"{name}: {knob} divides photographs' batches "
                         f"(source='imagefolder:PATH'), not {config.source!r}'s: leave it at its default")
    if config.dali_reader != "external":
        raise ValueError(f"{name}: {knob} runs with dali_reader='external' only, "
                         f"not {config.dali_reader!r}")
    if config.dali_decoder == "cpu":
        raise ValueError(f"{name}: {knob} with dali_decoder='cpu': it divides "
                         "batches between 'cpu' and 'mixed': use dali_decoder='mixed' (all on the CPU: "
                         "dali_decoder='cpu', share 0, one pipeline)")
    if gpus > 1 and 0 < share and config.dali_split == "samples":
        raise ValueError(f"{name}: dali_gpu_pipelines={gpus} decode whole batches in turn: with "
                         f"dali_cpu_share={share} use dali_split='batches'")
