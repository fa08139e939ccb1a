"""Data-parallel training of a small regression MLP on synthetic data: over gloo on CPU, or with
``--device cuda`` over NCCL, each rank on the one GPU its replica was given (``nvidia.com/gpu: 1``).

Rendezvous comes from the environment a PyTorchJob injects (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE), exactly as on a cluster. Rank 0 writes a checkpoint every ``--checkpoint-every``
steps to a directory every replica can read; on start every rank resumes from it, so a replica
restarted by its restart policy continues where the job left off instead of starting over.

Rank 0 reports the job's progress and loss to its status endpoint (``kubetrain get --local`` shows them):
``kubetrain.reporting`` is one standard-library file, which the example's image holds too. Run without the
endpoint's variables (``python train_ddp.py`` under torchrun, say) the reporter does nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path


def leave_at_sigterm() -> None:
    """Stopped (a job restarting every replica together, a drain), a rank gets SIGTERM, then SIGKILL after
    its grace period. The last checkpoint is already on disk (written, then renamed), so it leaves at once
    (exit code 143) instead of waiting out the grace period.

    A handler alone would not do: a rank whose peer died sits in a collective, a C++ call during which Python
    runs no signal handler. The interpreter's C-level handler does write the signal to the wakeup fd at once,
    and a thread waiting on it ends the process (tests/local/test_examples.py). It is installed before torch
    is imported: as a container's PID 1 a process ignores a signal it has no handler for, and the import
    takes seconds. One wait it cannot cut short: rank 0 creating the rendezvous store holds the GIL until
    every rank has connected."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))

    def exit_when_signalled(reader: socket.socket, writer: socket.socket) -> None:
        # The thread holds the writer: collected with this function's frame it would be closed, the reader
        # would read end-of-file at once and for ever (a thread spinning on the GIL made every step of a
        # pod's training slower), and the wakeup fd's number would be free for another file to reuse.
        while signal_number := reader.recv(1):
            if signal_number == bytes([signal.SIGTERM]):
                sys.stdout.flush()
                os._exit(128 + signal.SIGTERM)

    threading.Thread(target=exit_when_signalled, args=(reader, writer), name="sigterm", daemon=True).start()


if __name__ == "__main__":
    leave_at_sigterm()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from kubetrain.reporting import ProgressReporter  # noqa: E402

FEATURES = 16
SAMPLES_PER_RANK = 256


def synthetic_shard(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = sin(x·w) + noise, the same target function on every rank, a different shard per rank."""
    target = torch.Generator().manual_seed(1234)
    weights = torch.randn(FEATURES, 1, generator=target)
    shard = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(SAMPLES_PER_RANK, FEATURES, generator=shard)
    y = torch.sin(x @ weights) + 0.05 * torch.randn(SAMPLES_PER_RANK, 1, generator=shard)
    return x, y


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--checkpoint-dir", type=Path, default=Path(".state/checkpoints/pytorch-ddp"))
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument(
        "--step-seconds", type=float, default=0.0, help="Pause per step (slows the demo down)."
    )
    parser.add_argument("--fail-at-step", type=int, default=-1, help="Rank --fail-rank exits 1 here, once.")
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: train on the replica's GPU over NCCL (its first visible device: a pod's, or the one "
        "kubetrain run gave it in CUDA_VISIBLE_DEVICES).",
    )
    args = parser.parse_args()

    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    address = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"rank {rank}/{world} joined the process group via {address}, training on {where}")

    model = DistributedDataParallel(make_model().to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    checkpoint = args.checkpoint_dir / "checkpoint.pt"
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True, map_location=device)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        print(f"rank {rank} resumed from checkpoint at step {start}")

    x, y = (t.to(device) for t in synthetic_shard(rank))
    loss_fn = nn.MSELoss()
    reporter = ProgressReporter()  # reports at most every 5 s, from a thread of its own
    failure_marker = args.checkpoint_dir / f"failed-once-rank-{rank}"
    for step in range(start, args.steps):
        if rank == args.fail_rank and step == args.fail_at_step and not failure_marker.exists():
            failure_marker.parent.mkdir(parents=True, exist_ok=True)
            failure_marker.touch()
            print(f"rank {rank} fails on purpose at step {step}", flush=True)
            return 1
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        if rank == 0:
            # One replica reports for the job: the percentage, an ETA from its pace, the averaged loss.
            reporter.report_step(step + 1, args.steps, {"loss": mean.item()})
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step} loss {mean.item():.5f}")
        if rank == 0 and (step + 1) % args.checkpoint_every == 0:
            args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            temporary = checkpoint.with_suffix(".tmp")
            torch.save(
                {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1},
                temporary,
            )
            temporary.replace(checkpoint)
            print(f"checkpoint at step {step + 1}")
        if args.step_seconds:
            time.sleep(args.step_seconds)

    reporter.close()  # the last report goes now, not at the end of the interval
    dist.barrier()
    if rank == 0:
        # A finished run leaves no checkpoint behind, so the next run trains from scratch.
        torch.save(model.module.state_dict(), args.checkpoint_dir / "model.pt")
        checkpoint.unlink(missing_ok=True)
        for marker in args.checkpoint_dir.glob("failed-once-rank-*"):
            marker.unlink()
        print("training finished")
    leave_after_every_other_rank(rank, world)
    dist.destroy_process_group()
    return 0


def leave_after_every_other_rank(rank: int, world: int, timeout: timedelta = timedelta(minutes=1)) -> None:
    """Rank 0 exits last. A barrier returns on one rank before its last message has reached every other, and
    a process that exits with bytes unread resets its connections: a rank still reading would fail after
    training, with "Connection closed by peer", and a restart could never rejoin. So each other rank says so
    in the rendezvous store once past the barrier, and rank 0 waits for all of them."""
    store = dist.distributed_c10d._get_default_store()
    if rank != 0:
        store.set(f"left/{rank}", "1")
    else:
        store.wait([f"left/{other}" for other in range(1, world)], timeout)


def exit_now(code: int) -> None:
    """Ends the process without the interpreter's finalization. DistributedDataParallel keeps its process
    group alive past ``destroy_process_group`` (torch 2.13: gloo's threads run on until the process ends),
    and a rank finalizing while those threads run aborts now and then after training finished ("terminate
    called without an active exception", SIGABRT: seen in 1 of 12 runs at load average 6). A restart could
    never rejoin a finished job, so the job would wedge. Everything is saved and reported by now."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
