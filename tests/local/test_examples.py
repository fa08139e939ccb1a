"""Every example in examples/ runs for real, and the processes did what distributed training does."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from local.local_run import KUBETRAIN, REPO, Run, kubetrain_run, write_manifest
from waiting import PATIENCE

pytestmark = pytest.mark.local

EXAMPLES = REPO / "examples"


def example(name: str, checkpoints: Path | None = None, extra_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """An example's manifest, its checkpoints redirected to ``checkpoints`` and ``extra_args`` appended."""
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / name / "job.yaml").read_text())
    specs = next(v for k, v in manifest["spec"].items() if k.endswith("ReplicaSpecs"))
    for spec in specs.values():
        for container in spec["template"]["spec"]["containers"]:
            args = list(container.get("args", []))
            if checkpoints is not None and "--checkpoint-dir" in args:
                args[args.index("--checkpoint-dir") + 1] = str(checkpoints)
            container["args"] = [*args, *extra_args]
    return manifest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def losses(lines: list[str]) -> list[float]:
    return [float(m.group(1)) for line in lines if (m := re.match(r"step \d+ loss ([\d.]+)", line))]


def assert_succeeded(run: Run) -> None:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.condition("Succeeded") is not None


def reported(run: Run) -> tuple[int | None, dict[str, float]]:
    """The job's last progress report: its percentage and numeric metrics (``status.trainerStatus``)."""
    status = run.job_status.get("trainerStatus", {})
    return status.get("progressPercentage"), {m["name"]: float(m["value"]) for m in status.get("metrics", [])}


def test_pytorch_ddp_trains_over_gloo_with_three_ranks_and_the_loss_decreases(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("pytorch-ddp", tmp_path / "ckpt")), state_dir)
    assert_succeeded(run)
    joined = {m for line in run.stdout.splitlines() for m in re.findall(r"rank (\d)/3 joined", line)}
    assert joined == {"0", "1", "2"}
    seen = losses(run.lines_of("master-0"))
    assert len(seen) >= 10
    assert seen[-1] < 0.75 * seen[0]
    assert (tmp_path / "ckpt" / "model.pt").exists()
    progress, metrics = reported(run)
    assert progress == 100, "rank 0 reported its last step"
    assert round(metrics["loss"], 5) == seen[-1], "the loss reported is the loss printed at the last step"
    points = run.status_record["progress_history"]["points"]
    assert points[0]["p"] < 100 and points[-1]["p"] == 100


def test_pytorch_ddp_resumes_from_the_checkpoint_after_a_replica_restarts(
    tmp_path: Path, state_dir: Path
) -> None:
    # worker-1 (rank 2) fails once at step 25, after the step-20 checkpoint: OnFailure restarts it
    # in place, the other ranks' collectives fail and they restart too, and all resume at step 20.
    manifest = example("pytorch-ddp", tmp_path / "ckpt", ("--fail-rank", "2", "--fail-at-step", "25"))
    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir)
    assert_succeeded(run)
    assert run.replica("worker-1")["restarts"] >= 1
    assert "rank 2 fails on purpose at step 25" in run.lines_of("worker-1")
    assert "rank 0 resumed from checkpoint at step 20" in run.lines_of("master-0")
    assert "step 59 loss" in "\n".join(run.lines_of("master-0"))


def test_pytorch_ddp_under_restart_scope_job_survives_a_killed_rank_and_resumes_from_its_checkpoint(
    tmp_path: Path, state_dir: Path
) -> None:
    # Issue 29: worker-1's training process is killed (SIGKILL) after the step-20 checkpoint; with restart
    # scope Job every rank is stopped and started again together, and they all resume from the checkpoint.
    manifest = example("pytorch-ddp", tmp_path / "ckpt", ("--step-seconds", "0.2"))
    manifest["metadata"]["annotations"] = {"kubetrain.dev/restart-scope": "Job"}
    runner = subprocess.Popen(
        [KUBETRAIN, "run", str(write_manifest(tmp_path, manifest)), "--state-dir", str(state_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        master_log = state_dir / "pytorch-ddp" / "logs" / "master-0.log"
        deadline = time.monotonic() + PATIENCE
        while not (master_log.exists() and "checkpoint at step 20" in master_log.read_text()):
            assert time.monotonic() < deadline and runner.poll() is None, "training never reached step 20"
            time.sleep(0.2)
        status = json.loads((state_dir / "pytorch-ddp" / "status.json").read_text())
        killed = next(r["pid"] for r in status["replicas"] if r["name"] == "worker-1")
        psutil.Process(killed).send_signal(signal.SIGKILL)
        stdout, stderr = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            runner.wait(timeout=PATIENCE)
    run = Run(runner.returncode, stdout, stderr, state_dir, "pytorch-ddp")
    assert_succeeded(run)
    warnings = [e["message"] for e in run.status_record["events"] if e["reason"] == "PyTorchJobRestarting"]
    assert len(warnings) == 1, warnings
    assert (
        "because Worker replica 1 (pod pytorch-ddp-worker-1) container pytorch exited with code 137"
        in (warnings[0])
    )
    assert all(run.replica(name)["restarts"] >= 1 for name in ("master-0", "worker-0", "worker-1"))
    resumed = [
        int(m.group(1))
        for line in run.lines_of("master-0")
        if (m := re.match(r"rank 0 resumed from checkpoint at step (\d+)", line))
    ]
    assert resumed and resumed[-1] >= 20, "every rank started again from the checkpoint"
    assert "step 59 loss" in "\n".join(run.lines_of("master-0"))
    assert sum(s.get("restarts", 0) for s in run.job_status["replicaStatuses"].values()) == 1


def test_elastic_pytorch_re_rendezvouses_when_a_worker_process_is_killed(
    tmp_path: Path, state_dir: Path
) -> None:
    manifest = write_manifest(tmp_path, example("pytorch-elastic", tmp_path / "ckpt"))
    runner = subprocess.Popen(
        [KUBETRAIN, "run", str(manifest), "--state-dir", str(state_dir), "--grace-period", "5"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        worker0_log = state_dir / "pytorch-elastic" / "logs" / "worker-0.log"
        deadline = time.monotonic() + PATIENCE
        while not (worker0_log.exists() and "step 8 loss" in worker0_log.read_text()):
            assert time.monotonic() < deadline and runner.poll() is None, "training never reached step 8"
            time.sleep(0.2)
        status = json.loads((state_dir / "pytorch-elastic" / "status.json").read_text())
        agent = next(r["pid"] for r in status["replicas"] if r["name"] == "worker-1")
        (training,) = psutil.Process(agent).children()
        training.send_signal(signal.SIGKILL)
        stdout, stderr = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            runner.wait(timeout=PATIENCE)
    run = Run(runner.returncode, stdout, stderr, state_dir, "pytorch-elastic")
    assert_succeeded(run)
    restarted_at = [
        int(m.group(1))
        for line in run.lines_of("worker-1")
        if (m := re.search(r"starts at step (\d+)", line))
    ]
    assert restarted_at[0] == 0
    assert restarted_at[-1] >= 8, "the re-rendezvoused workers continue from the checkpoint"
    joins = [line for line in run.lines_of("worker-1") if "joined" in line]
    assert len(joins) >= 2 and f"pid {training.pid}" in joins[0]


def test_xgboost_trains_one_booster_over_the_collective(tmp_path: Path, state_dir: Path) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("xgboost")), state_dir)
    assert_succeeded(run)
    allreduced = [line for line in run.stdout.splitlines() if "allreduce of ranks = 3" in line]
    assert len(allreduced) == 3
    (master_result,) = [line for line in run.lines_of("master-0") if "logloss" in line]
    first, last = map(float, re.findall(r"first ([\d.]+) last ([\d.]+)", master_result)[0])
    assert last < first
    progress, metrics = reported(run)
    assert progress == 100, "the master's callback reported the last round"
    assert round(metrics["logloss"], 4) == last


def test_jax_processes_psum_across_the_coordinator(tmp_path: Path, state_dir: Path) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("jax")), state_dir)
    assert_succeeded(run)
    for replica, process in (("worker-0", 0), ("worker-1", 1)):
        lines = run.lines_of(replica)
        assert f"process {process} of 2, 2 devices in all" in lines
        assert f"process {process}: psum = 3 (expected 3)" in lines


def test_paddle_replicas_see_their_paddle_env(tmp_path: Path, state_dir: Path) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("paddle")), state_dir)
    assert_succeeded(run)
    masters = set()
    for replica in ("worker-0", "worker-1"):
        (seen,) = [line for line in run.lines_of(replica) if line.startswith("PADDLE_JOB_ID")]
        assert "PADDLE_JOB_ID=paddle-env PADDLE_NNODES=2" in seen
        masters.add(seen.rsplit("PADDLE_MASTER=", 1)[1])
    (master,) = masters
    assert re.fullmatch(r"127\.0\.0\.1:\d+", master), "worker-0's $(POD_IP_DUMMY) became its loopback address"


def test_paddle_worker_1_joins_worker_0s_rendezvous_at_its_paddle_master(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("paddle")), state_dir)
    assert_succeeded(run)
    (joined,) = [line for line in run.lines_of("worker-1") if " joined the master at " in line]
    (served,) = [line for line in run.lines_of("worker-0") if line.startswith("master ")]

    assert joined.endswith(": ok")
    assert re.fullmatch(r"master 127\.0\.0\.1:\d+: 2 of 2 nodes joined \(.+\)", served)


@pytest.mark.slow
def test_tensorflow_multi_worker_mirrored_strategy_all_reduces_and_trains(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("tensorflow")), state_dir)
    assert_succeeded(run)
    for replica, index in (("worker-0", 0), ("worker-1", 1)):
        lines = run.lines_of(replica)
        assert f"task worker-{index}: 2 replicas in sync" in lines
        assert "all-reduce of ones = 2" in lines
        (result,) = [line for line in lines if line.startswith("loss first")]
        first, last = map(float, re.findall(r"first ([\d.]+) last ([\d.]+)", result)[0])
        assert last < first


def test_mpi_launcher_runs_one_rank_per_hostfile_slot_and_they_allreduce(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(write_manifest(tmp_path, example("mpi")), state_dir)
    assert_succeeded(run)
    assert [r["name"] for r in run.status_record["replicas"]] == ["launcher-0"], "workers are not processes"
    assert (state_dir / "mpi-allreduce" / "config" / "hostfile").read_text().strip() == "localhost slots=4"
    results = sorted(line for line in run.lines_of("launcher-0") if "allreduce of ranks" in line)
    assert len(results) == 4, "mpirun started slotsPerWorker * workers ranks from the hostfile alone"
    for rank, line in enumerate(results):
        assert line.startswith(f"rank {rank} of 4 ")
        assert line.endswith("allreduce of ranks = 6 (expected 6)")


AS_PID_1 = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child")
"""What a container's command is: PID 1 of its own PID namespace, which ignores a signal it has no handler for
when it comes from outside (the kubelet's SIGTERM)."""


def test_a_pytorch_ddp_rank_blocked_in_a_collective_leaves_at_sigterm_with_143(tmp_path: Path) -> None:
    # Rank 1 stopped (SIGSTOP) leaves rank 0, its container's PID 1, in an all-reduce: a C++ call during which
    # Python runs no signal handler. Stopped by a job restart, it would wait out its whole grace period.
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    command = [sys.executable, "-u", str(EXAMPLES / "pytorch-ddp" / "train_ddp.py"), "--steps", "100000"]
    command += ["--step-seconds", "0.05", "--checkpoint-dir", str(tmp_path)]
    ranks = [
        subprocess.Popen([*AS_PID_1, *command], env={**env, "RANK": "0"}, stdout=subprocess.PIPE, text=True),
        subprocess.Popen(command, env={**env, "RANK": "1"}, stdout=subprocess.DEVNULL, text=True),
    ]
    try:
        assert ranks[0].stdout is not None
        for line in ranks[0].stdout:
            if line.startswith("step 5 "):
                break
        ranks[1].send_signal(signal.SIGSTOP)
        [rank_0] = psutil.Process(ranks[0].pid).children()
        rank_0.send_signal(signal.SIGTERM)
        returncode = ranks[0].wait(timeout=PATIENCE)
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()

    assert returncode == 143


def test_a_pytorch_ddp_rank_waiting_for_sigterm_spends_no_cpu_on_it(tmp_path: Path) -> None:
    # The watcher thread blocks on the signal's wakeup fd. It once read end-of-file there for ever (its writer
    # collected and closed): a core's worth of CPU per rank, and every step of a pod's training slower.
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "1"}
    command = [sys.executable, "-u", str(EXAMPLES / "pytorch-ddp" / "train_ddp.py"), "--steps", "100000"]
    command += ["--step-seconds", "0.5", "--checkpoint-dir", str(tmp_path)]
    rank = subprocess.Popen(command, env={**env, "RANK": "0"}, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout is not None
        for line in rank.stdout:
            if line.startswith("step 5 "):
                break
        process = psutil.Process(rank.pid)
        before = process.cpu_times()
        time.sleep(3)  # six steps of sleeping training
        after = process.cpu_times()
    finally:
        rank.kill()
        rank.wait()

    spent = (after.user + after.system) - (before.user + before.system)
    assert spent < 1.0, f"{spent:.1f} CPU seconds in 3 s of a training that sleeps"
