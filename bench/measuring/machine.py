"""The machine around a measurement: the CPU budget a configuration runs on, the CPU time it burns,
the GPU's clocks, link, temperature and power while it runs, and what tells one host from another.

- `cpu_budget(cpus, slot)`: confine this process (every thread it has and every process or thread
  it starts later: DataLoader workers, DALI's and torch's threads) to `cpus` cores of those it may
  use (`os.sched_getaffinity`), rank `slot` of a torchrun job taking the slot-th disjoint set; torch's
  intra-op threads follow the budget. Restored when the block ends. (DataLoader workers also confine
  themselves to their loader's cores: `pipelines.workers.worker_options`.)
- `cpu_seconds()`: user + system CPU seconds of this process and all its descendants (workers,
  forkservers), from /proc in clock ticks, so a window's CPU cost is the difference of two readings
  (the training thread's own share: `time.thread_time()`, `bench.measuring.harness.time_window`).
- `blocking_waits(device)`: CUDA waits of this process block instead of spinning (the primary
  context's CU_CTX_SCHED_BLOCKING_SYNC): a thread blocked on the GPU sleeps rather than spin a core.
  A training thread that runs ahead of the GPU still burns CPU between its waits (the rows record it).
- `GpuMonitor`: SM and memory clocks, the PCIe link, the temperature (°C), the power draw (W), the
  reasons NVML gives for holding the clocks down (`clock_events`: "sw-power-cap", "hw-thermal",
  ... joined by "+", "none" for none, `CLOCK_EVENTS`) and the hardware JPEG decoder's utilization
  (`gpu_jpg_util`: NVML's percent of its last sampling period the JPEG engines were busy, so a row
  shows whether they decoded) of a GPU through NVML (`nvidia-ml-py`), read at a window's end while
  its work is still running; each reading on its own (one the GPU or driver cannot give, e.g. no
  JPEG engine, is left out, the others kept); empty where NVML is missing.
- `host_identity()`: CPU model, boot id and a short host-speed figure (`host_calibration_ms`: one
  core sorting 2^20 float64 numbers, median of 3) that rows record, so runs of two machines (or two
  leases of one kind, whose host CPUs can differ) are never taken for one.
- `release(device)`: free what dropped objects still hold (Python's garbage, DALI's pools, torch's
  CUDA and pinned-memory caches) between configurations of one process.
"""
from __future__ import annotations

import contextlib
import gc
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def cores_text(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    runs, start = [], None
    for i, core in enumerate(cores):
        if start is None:
            start = core
        if i + 1 == len(cores) or cores[i + 1] != core + 1:
            runs.append(f"{start}" if start == core else f"{start}-{core}")
            start = None
    return ",".join(runs)


def budget_refusal(cpus: int, slots: int = 1) -> str | None:
    """Why `cpus` cores per process cannot be given to `slots` processes here (None if they can)."""
    have = len(allowed_cores())
    if cpus < 1:
        return f"--cpus {cpus}: expected a positive number of cores"
    if cpus * slots > have:
        per = f" for each of {slots} processes" if slots > 1 else ""
        return f"--cpus {cpus}{per}: this process may use {have} cores ({cores_text(allowed_cores())})"
    return None


def _set_affinity(cores) -> None:
    """Every thread of this process onto `cores` (threads started later inherit it)."""
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.sched_setaffinity(int(task.name), cores)


@contextlib.contextmanager
def cpu_budget(cpus: int | None, slot: int = 0):
    """Run the block on `cpus` cores (None: every usable core, unchanged); yields the cores."""
    available = allowed_cores()
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        yield available
        return
    refusal = budget_refusal(cpus, slot + 1)
    if refusal:
        raise ValueError(refusal)
    cores = available[slot * cpus:(slot + 1) * cpus]
    threads = torch.get_num_threads()
    _set_affinity(cores)
    torch.set_num_threads(cpus)
    try:
        yield cores
    finally:
        _set_affinity(available)
        torch.set_num_threads(threads)


def descendants(pid: int) -> list[int]:
    """The live processes below `pid` (children, their children, ...)."""
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
            found += kids
            todo += kids
    return found


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(fields[11]) + int(fields[12])   # utime, stime (all threads)


CU_CTX_SCHED_BLOCKING_SYNC = 0x04


def blocking_waits(device: torch.device) -> bool:
    """Make CUDA waits block (module docstring) on `device`'s primary context, through the driver
    (`cuDevicePrimaryCtxSetFlags`; it applies to a context already active too, on current drivers).
    Whether the driver took it; False without CUDA or a driver library."""
    if device.type != "cuda":
        return False
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        handle = ctypes.c_int()
        index = device.index or 0   # "cuda" is device 0 in a process that has chosen none
        set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
        return (cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(handle), index) == 0
                and set_flags(handle, CU_CTX_SCHED_BLOCKING_SYNC) == 0)
    except (OSError, AttributeError):
        return False


def cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and every live descendant; NaN where
    /proc is missing. A descendant that exits between two readings takes its seconds with it."""
    if not Path("/proc/self/stat").exists():
        return float("nan")
    pid = os.getpid()
    return sum(_cpu_ticks(p) for p in [pid, *descendants(pid)]) / TICK


class GpuMonitor:
    """NVML readings of one CUDA device; `sample()` is {} without a GPU or without NVML."""

    def __init__(self, device: torch.device):
        self.handle = None
        if device.type != "cuda":
            return
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(self._bus_id(device))
            except pynvml.NVMLError:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{torch.cuda.get_device_properties(device).uuid}")
        except Exception:   # no NVML library, an old driver, no such device: readings are optional
            self.handle = None

    @staticmethod
    def _bus_id(device: torch.device) -> str:
        """The device's PCI bus id as NVML spells it ("00000000:19:00.0"), from torch's properties."""
        p = torch.cuda.get_device_properties(device)
        return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"

    def sample(self) -> dict[str, object]:
        """The readings now (module docstring), each on its own: one NVML cannot give is left out."""
        if self.handle is None:
            return {}
        n, h = self.nvml, self.handle
        ways = {"sm_mhz": [lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)],
                "mem_mhz": [lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)],
                "pcie": [lambda: f"gen{n.nvmlDeviceGetCurrPcieLinkGeneration(h)} "
                                 f"x{n.nvmlDeviceGetCurrPcieLinkWidth(h)}"],
                "gpu_temp_c": [lambda: n.nvmlDeviceGetTemperatureV(h, n.NVML_TEMPERATURE_GPU),
                               lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)],
                "gpu_power_w": [lambda: n.nvmlDeviceGetPowerUsage(h) / 1e3],   # NVML reports mW
                # the newer name first, the older one for older drivers and bindings
                "clock_events": [lambda: clock_event_names(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
                                 lambda: clock_event_names(n.nvmlDeviceGetCurrentClocksThrottleReasons(h))],
                "gpu_jpg_util": [lambda: n.nvmlDeviceGetJpgUtilization(h)[0]]}   # (percent, sampling period µs)
        found = {}
        for column, alternatives in ways.items():
            for read in alternatives:
                try:
                    found[column] = read()
                    break
                except Exception:   # not supported on this GPU or driver, a missing binding: the next, or none
                    continue
        return found


# NVML's clock event (throttle) reason bits (nvmlClocksEventReason*, nvmlClocksThrottleReason*), by name
CLOCK_EVENTS = {0x1: "idle", 0x2: "app-clocks", 0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x10: "sync-boost",
                0x20: "sw-thermal", 0x40: "hw-thermal", 0x80: "hw-power-brake", 0x100: "display-clocks",
                0x200: "board-limit", 0x400: "reliability"}


def clock_event_names(reasons: int) -> str:
    """NVML's reason bits as names joined by "+" ("none" for none; a bit it does not name in hex)."""
    names = [name for bit, name in CLOCK_EVENTS.items() if reasons & bit]
    unknown = reasons & ~sum(CLOCK_EVENTS)
    return "+".join(names + ([hex(unknown)] if unknown else [])) or "none"


def host_identity() -> dict[str, object]:
    """CPU model, boot id and host-speed figure (module docstring)."""
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    values = np.random.default_rng(0).random(1 << 20)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        np.sort(values, kind="quicksort")
        times.append(time.perf_counter() - start)
    return {"cpu_model": model, "boot_id": boot, "host_calibration_ms": round(1e3 * float(np.median(times)), 2)}


def release(device: torch.device) -> None:
    """Free what dropped objects still hold: Python garbage, then the unused blocks of DALI's device and
    pinned memory pools (where DALI was imported), then the CUDA caching allocator's cache and torch's
    cache of pinned host memory, so the next configuration of a process starts without them."""
    gc.collect()
    dali = sys.modules.get("nvidia.dali.backend")
    if dali is not None and hasattr(dali, "ReleaseUnusedMemory"):
        dali.ReleaseUnusedMemory()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        empty_host_cache = getattr(getattr(torch, "accelerator", None), "empty_host_cache", None) \
            or getattr(torch._C, "_host_emptyCache", None)   # newer torches' public name, else (2.11) the private one
        if empty_host_cache is not None:
            empty_host_cache()
