"""Start-to-rendezvous time of ``kubetrain run --runtime podman|docker`` against ``--runtime process``.

Runs ``examples/pytorch-ddp/job.yaml`` unchanged (1 master + 2 workers) with each runtime, alternately, in
the same run: the clock starts when ``kubetrain run`` is launched and stops when the last of the 3 ranks
has printed ``rank r/3 joined the process group``, which the example prints right after
``init_process_group`` returns (the line is read from kubetrain's stdout as it arrives). The run is then
interrupted (Ctrl-C), so training time is not part of the number. With podman the ranks resolve
``pytorch-ddp-master-0`` through the job network's DNS; with processes they meet on 127.0.0.1.

Needs podman and ``python tools/images/build.py pytorch`` (``make test-containers`` builds it); for
docker, ``make docker`` and the image in docker's storage (``tools/containers/docker-load.sh``).

Usage::

    .venv/bin/python bench/container_startup.py [--runs 3] [--markdown] [--runtime process --runtime docker]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KUBETRAIN = str(Path(sys.executable).parent / "kubetrain")
MANIFEST = REPO / "examples" / "pytorch-ddp" / "job.yaml"
RANKS = 3
JOINED = "joined the process group"
RUNTIMES = ("process", "podman")
"""The default comparison; ``--runtime`` names others (each is compared with the first)."""


def time_to_rendezvous(runtime: str, state_dir: Path) -> float:
    started = time.monotonic()
    runner = subprocess.Popen(
        [
            KUBETRAIN,
            "run",
            str(MANIFEST),
            "--runtime",
            runtime,
            "--state-dir",
            str(state_dir),
            "--quiet",
            "--grace-period",
            "2",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert runner.stdout is not None
    joined = 0
    elapsed = None
    for line in runner.stdout:
        if JOINED in line:
            joined += 1
            if joined == RANKS:
                elapsed = time.monotonic() - started
                break
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=120)
    if elapsed is None:
        raise RuntimeError(
            f"--runtime {runtime}: only {joined} of {RANKS} ranks joined (exit {runner.returncode})"
        )
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="Print a table row for docs/benchmarks.md.")
    parser.add_argument(
        "--runtime", action="append", choices=("process", "podman", "docker"), dest="runtimes"
    )
    args = parser.parse_args()
    runtimes: tuple[str, ...] = tuple(args.runtimes or RUNTIMES)
    times: dict[str, list[float]] = {runtime: [] for runtime in runtimes}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for runtime in runtimes:
                times[runtime].append(time_to_rendezvous(runtime, Path(scratch)))
                print(f"{runtime}: {times[runtime][-1]:.2f} s", file=sys.stderr)
    load = os.getloadavg()[0]
    medians = {runtime: statistics.median(times[runtime]) for runtime in runtimes}
    base = runtimes[0]
    if args.markdown:
        others = runtimes[1:]
        columns = [f"--runtime {r} (median)" for r in runtimes] + [f"{r} - {base}" for r in others]
        print(f"| ranks | runs | {' | '.join(columns)} | load |")
        print("|" + "---|" * (len(columns) + 3))
        cells = [f"{medians[r]:.2f} s" for r in runtimes] + [
            f"{medians[r] - medians[base]:+.2f} s" for r in others
        ]
        print(f"| {RANKS} | {args.runs} | {' | '.join(cells)} | {load:.1f} |")
    else:
        for runtime in runtimes:
            spread = ", ".join(f"{t:.2f}" for t in times[runtime])
            print(f"{runtime}: median {statistics.median(times[runtime]):.2f} s ({spread})")
        print(f"load average {load:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
