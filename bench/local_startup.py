"""Startup cost of ``kubetrain run`` against ``torchrun --standalone`` for a 4-rank DDP job.

Measured: wall time from launching the command until all 4 ranks have joined the gloo process
group (rank 0 prints the time right after a barrier that every rank reaches once it has joined).
Both launchers run this same file as the rank program, in the same run, alternately, so the
comparison shares the machine's state; the median of ``--runs`` launches each is reported, with
the ratio kubetrain / torchrun.

    .venv/bin/python bench/local_startup.py --runs 5 [--markdown]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RANKS = 4
JOINED = re.compile(r"ALL_JOINED (\d+\.\d+)")


def join_and_report() -> int:
    """The rank program: join the process group, wait for everyone, rank 0 reports the time."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"ALL_JOINED {time.time():.6f}", flush=True)
    dist.destroy_process_group()
    return 0


def job_manifest() -> dict[str, object]:
    def replicas(count: int) -> dict[str, object]:
        command = ["python", str(Path(__file__).resolve()), "join"]
        container = {"name": "pytorch", "image": "pytorch/pytorch", "command": command}
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bench-startup"},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(RANKS - 1)}},
    }


def time_to_join(argv: list[str], env: dict[str, str]) -> float:
    started = time.time()
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    found = JOINED.search(result.stdout + result.stderr)
    if result.returncode != 0 or found is None:
        raise RuntimeError(
            f"{argv[0]} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return float(found.group(1)) - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", choices=["bench", "join"], default="bench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="Print a table row for docs/benchmarks.md.")
    args = parser.parse_args()
    if args.mode == "join":
        return join_and_report()

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as scratch:
        manifest = Path(scratch) / "job.yaml"
        manifest.write_text(yaml.safe_dump(job_manifest()))
        kubetrain = [
            str(BIN / "kubetrain"),
            "run",
            str(manifest),
            "--quiet",
            "--state-dir",
            f"{scratch}/state",
        ]
        torchrun = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", str(RANKS), __file__, "join"]
        timings: dict[str, list[float]] = {"kubetrain": [], "torchrun": []}
        for attempt in range(args.runs):
            for name, argv in (("kubetrain", kubetrain), ("torchrun", torchrun)):
                seconds = time_to_join(argv, env)
                timings[name].append(seconds)
                print(f"run {attempt + 1}: {name:<9} {seconds:.2f}s", file=sys.stderr)

    kubetrain_median = statistics.median(timings["kubetrain"])
    torchrun_median = statistics.median(timings["torchrun"])
    ratio = kubetrain_median / torchrun_median
    print(f"kubetrain run: median {kubetrain_median:.2f}s over {args.runs} runs")
    print(f"torchrun --standalone: median {torchrun_median:.2f}s over {args.runs} runs")
    print(f"ratio kubetrain/torchrun: {ratio:.2f}")
    if args.markdown:
        print(f"| {RANKS} | {args.runs} | {kubetrain_median:.2f} s | {torchrun_median:.2f} s | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
