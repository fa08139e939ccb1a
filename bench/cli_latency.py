"""Wall time of the CLI commands a user types most, as a fresh process each time (what a shell pays).

Reports the median and the spread of ``--runs`` runs (default 10) of ``kubetrain version``,
``kubetrain get --local`` (on an empty state directory, and on one holding three finished runs, which it
reads and validates) and ``kubetrain plan examples/pytorch-ddp/job.yaml``, beside a bare ``python -c pass``
(the interpreter's own start, the floor) and the machine's load average.
Targets (issue 13): version and get --local under 0.3 s, plan under 0.5 s.

Usage::

    .venv/bin/python bench/cli_latency.py [--runs 10] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KUBETRAIN = Path(sys.executable).parent / "kubetrain"

TARGETS = {"version": 0.3, "get --local": 0.3, "plan examples/pytorch-ddp/job.yaml": 0.5}
WITH_RUNS = "get --local (3 finished runs)"
RUN_MANIFEST = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: {name}}}
spec:
  pytorchReplicaSpecs:
    Master:
      restartPolicy: Never
      template:
        spec:
          containers: [{{name: pytorch, image: unused, command: [{python}, -c, pass]}}]
"""


def finished_runs(state: Path, count: int) -> None:
    for index in range(count):
        manifest = state / f"run-{index}.yaml"
        manifest.write_text(RUN_MANIFEST.format(name=f"run-{index}", python=sys.executable))
        subprocess.run(
            [str(KUBETRAIN), "run", str(manifest)],
            env={**os.environ, "KUBETRAIN_STATE_DIR": str(state)},
            check=True,
            stdout=subprocess.DEVNULL,
        )


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and the CPU seconds (user + system) the command used: on a loaded machine the wall
    time is mostly waiting for a core, the CPU time is what the command costs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as with_runs:
        finished_runs(Path(with_runs), 3)
        env = {**os.environ, "KUBETRAIN_STATE_DIR": empty}
        commands = {"python -c pass (floor)": ([sys.executable, "-c", "pass"], env)}
        commands |= {name: ([str(KUBETRAIN), *name.split()], env) for name in TARGETS}
        commands[WITH_RUNS] = ([str(KUBETRAIN), "get", "--local"], {**env, "KUBETRAIN_STATE_DIR": with_runs})
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        load = os.getloadavg()
        for _ in range(args.runs):
            for name, (command, command_env) in commands.items():  # interleaved: load hits all alike
                wall, used = timed(command, command_env)
                times[name].append(wall)
                cpu[name].append(used)
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.runs} runs each")
    if args.markdown:
        print("| command | median wall | min | max | median CPU (user + sys) | target (wall) |")
        print("|---|---|---|---|---|---|")
    for name, values in times.items():
        target = TARGETS.get(name, TARGETS["get --local"] if name == WITH_RUNS else None)
        median = statistics.median(values)
        used = statistics.median(cpu[name])
        verdict = "" if target is None else (f"< {target} s " + ("met" if median < target else "MISSED"))
        if args.markdown:
            print(
                f"| `{name}` | {median:.3f} s | {min(values):.3f} s | {max(values):.3f} s | {used:.3f} s "
                f"| {verdict} |"
            )
        else:
            print(
                f"{name:45} median {median:.3f} s  min {min(values):.3f}  max {max(values):.3f}  "
                f"CPU {used:.3f} s  {verdict}"
            )


if __name__ == "__main__":
    main()
