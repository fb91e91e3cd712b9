"""torch.distributed for the harness: one process per GPU under `torchrun`, NCCL on GPUs, gloo on CPUs.

    torchrun --nproc-per-node 2 -m bench.cli compare ...            # one node, two GPUs
    torchrun --nnodes 2 --node-rank R --rdzv-backend c10d --rdzv-endpoint HOST:PORT \\
             --nproc-per-node 8 -m bench.cli sweep --out DIR ...     # rendezvous arguments pass through

`torchrun` sets RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and the rendezvous (MASTER_ADDR / MASTER_PORT,
and TORCHELASTIC_USE_AGENT_STORE where its agent hosts the store); `pipebench --ranks N` sets the same for the
N processes it starts, hosting that store itself (`bench.running.runner.rank_environments`). `setup` reads them, binds
the process to GPU LOCAL_RANK and initialises the default process group (env://). Without them (a plain
`pipebench ...`) nothing here does anything: world size 1, rank 0.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1   # processes on this node

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def from_env() -> World:
    """The process's place in a `torchrun` job, from its environment (rank 0 of 1 without one)."""
    try:
        world = World(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                      int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    except ValueError as e:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE must be integers: {e}") from None
    if not 0 <= world.rank < world.world_size:
        raise ValueError(f"RANK={world.rank} with WORLD_SIZE={world.world_size}: expected 0 <= RANK < WORLD_SIZE")
    return world


def setup(device: str) -> tuple[World, str]:
    """Join the job `torchrun` started, if any: (world, device for this process). With CUDA the
    process takes GPU LOCAL_RANK and the group uses NCCL; on CPU, gloo."""
    world = from_env()
    if not world.distributed:
        return world, device
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        if world.local_rank >= torch.cuda.device_count():
            raise ValueError(f"LOCAL_RANK={world.local_rank}: this node has {torch.cuda.device_count()} GPUs")
        device = f"cuda:{world.local_rank}"
        torch.cuda.set_device(device)
    else:
        device = "cpu"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", **({"device_id": torch.device(device)} if cuda else {}))
    return world, device


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def barrier() -> None:
    if active():
        dist.barrier()


def gather(obj) -> list:
    """`obj` from every rank, in rank order, on every rank ([obj] without a process group)."""
    if not active():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj):
    """Rank 0's `obj` on every rank."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
