"""Elastic PyTorch: run under ``torchrun``, which a PyTorchJob with an elasticPolicy configures
through PET_* env (rendezvous endpoint, min:max nodes, restarts).

When any worker process dies, torchrun's agents tear the worker group down, re-rendezvous with
whoever is alive and start the workers again; this script then resumes from the last checkpoint,
so training continues instead of starting over. Each rank prints when it joined and from which
step it (re)started, so a test can see the re-rendezvous happen.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

FEATURES = 8


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-dir", type=Path, default=Path(".state/checkpoints/pytorch-elastic"))
    parser.add_argument("--step-seconds", type=float, default=0.2)
    parser.add_argument("--collective-timeout", type=float, default=30.0)
    args = parser.parse_args()

    # A bounded timeout turns a half-formed group (a peer died while connecting) into an error, so
    # torchrun restarts the workers and re-rendezvouses instead of waiting 30 minutes.
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.collective_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank} of {world} joined (pid {os.getpid()}, restart {attempt})", flush=True)

    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    checkpoint = args.checkpoint_dir / "checkpoint.pt"
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    print(f"rank {rank} starts at step {start}", flush=True)

    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(128, FEATURES, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    for step in range(start, args.steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        for parameter in model.parameters():
            assert parameter.grad is not None
            dist.all_reduce(parameter.grad)
            parameter.grad /= world
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            temporary = checkpoint.with_suffix(".tmp")
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1},
                temporary,
            )
            temporary.replace(checkpoint)
        time.sleep(args.step_seconds)

    dist.barrier()
    if rank == 0:
        checkpoint.unlink(missing_ok=True)
        print("training finished", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
