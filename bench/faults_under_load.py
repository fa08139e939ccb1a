"""The fault suite at full size: a burst of 500 PyTorchJobs (2,000 pods, 2,000 services) on envtest (fake
nodes, every bound pod made Running by the suite's kubelet stand-in) for each fault, each on a fresh envtest
whose API server keeps an audit log (tests/fault_suite has the scenarios and the checks).

For each scenario it prints what was done, when the operator's work next reached the API server after each
fault, when every job was Running, and what was checked; any broken invariant (a missing or extra child, a
child created twice or deleted, a job not Running, a write from a replica without the Lease) is printed and
makes the run exit 1. ``--markdown`` prints docs/operations.md's table.

Usage (no envtest needs to run; each scenario starts its own)::

    .venv/bin/python bench/faults_under_load.py --jobs 500 --markdown
    .venv/bin/python bench/faults_under_load.py --jobs 500 --scenarios paused-leader --seed 7
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fault_suite.burst import FaultCluster
from fault_suite.scenarios import SCENARIOS, Report, run_scenario


def _seconds(values: list[float]) -> str:
    shown = [value for value in values if not math.isnan(value)]
    if not shown:
        return "-"
    if len(shown) == 1:
        return f"{shown[0]:.1f} s"
    return f"{min(shown):.1f} to {max(shown):.1f} s ({len(shown)} faults)"


def describe(report: Report) -> str:
    lines = [
        f"{report.name}: {SCENARIOS[report.name][0]} ({report.jobs} jobs, seed {report.seed})",
        *(f"  fault: {fault.what}" for fault in report.faults),
        *(f"  note: {note}" for note in report.notes),
        *(f"  replica: {exit}" for exit in report.exits),
        f"  operator writing again after: {_seconds(report.resumed)}",
        f"  every job Running {report.converged:.1f} s after the last fault, "
        f"{report.burst:.1f} s after the burst",
        f"  checked: {report.pods} pods, {report.services} services, {report.writes} writes of the operator "
        f"by {report.replicas} replicas, {report.holders} Lease holders, {report.relists} watches answered "
        "410",
        *(f"  PROBLEM {problem}" for problem in report.problems[:50]),
    ]
    return "\n".join(lines)


def markdown(reports: list[Report], load: list[tuple[float, float, float]]) -> str:
    rows = [
        "| fault | operator writing again after the fault | every job Running after the last fault "
        "(whole burst) | checked |",
        "|---|---|---|---|",
    ]
    for report in reports:
        faults = "; ".join(fault.what for fault in report.faults) or "none"
        held = f", {report.holders} Lease holders" if report.holders else ""
        gone = f", {report.relists} watches answered 410" if report.relists else ""
        verdict = "all held" if not report.problems else f"{len(report.problems)} PROBLEMS"
        rows.append(
            f"| {SCENARIOS[report.name][0]} ({faults}) | {_seconds(report.resumed)} | "
            f"{report.converged:.1f} s ({report.burst:.1f} s) | {report.pods} pods, {report.services} "
            f"services, {report.writes} operator writes by {report.replicas} replicas{held}{gone}: "
            f"{verdict} |"
        )
    loads = ", ".join(f"{one:.1f}/{five:.1f}" for one, five, _ in load)
    rows.append("")
    rows.append(f"Load average (1 min / 5 min) at the start of each scenario: {loads}.")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    parser.add_argument(
        "--logs", type=Path, default=None, help="where the operators' logs go (default: a temp dir)"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="fault-suite-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"seed {seed}; operator logs in {logs}", flush=True)
    reports: list[Report] = []
    load: list[tuple[float, float, float]] = []
    for name in args.scenarios:
        load.append(os.getloadavg())
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="fault-envtest-") as run_dir:
            cluster = FaultCluster(Path(run_dir))
            try:
                report = run_scenario(cluster, name, args.jobs, seed, logs)
            finally:
                cluster.stop()
        reports.append(report)
        print(describe(report), f"\n  ({time.monotonic() - started:.0f} s with envtest)", flush=True)
    if args.markdown:
        print(markdown(reports, load))
    if any(report.problems for report in reports):
        sys.exit(1)


if __name__ == "__main__":
    main()
