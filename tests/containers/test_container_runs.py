"""``kubetrain run --runtime podman|docker``: the examples train in their images, with the cluster's rules.

Every test runs under each engine (the ``runtime`` fixture), skipped with the reason where one cannot run;
replicas resolve each other by their Kubernetes names.

The examples' manifests run as written: their images (``localhost/kubetrain/pytorch``, ``.../xgboost``)
hold ``examples/`` in their working directory, as ``tools/images/build.py`` builds them.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from containers.container_env import (
    MPI_IMAGE,
    PYTHON_IMAGE,
    PYTORCH_IMAGE,
    XGBOOST_IMAGE,
    containers_of,
    network_exists,
    require_image,
    running_containers_of,
    wait_for,
)
from local.local_run import KUBETRAIN, REPO, Run, kubetrain_run, write_manifest
from waiting import PATIENCE

pytestmark = [pytest.mark.containers, pytest.mark.slow]


def python_job(
    name: str, replicas: dict[str, tuple[int, str]], restart_policy: str = "Never"
) -> dict[str, Any]:
    """A PyTorchJob whose replicas run ``python -c CODE`` in the Python base image."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                replica_type: {
                    "replicas": count,
                    "restartPolicy": restart_policy,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch",
                                    "image": PYTHON_IMAGE,
                                    "command": ["python", "-c", code],
                                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                                }
                            ],
                            "volumes": [{"name": "scratch", "emptyDir": {}}],
                        }
                    },
                }
                for replica_type, (count, code) in replicas.items()
            }
        },
    }


def start(manifest: Path, state_dir: Path, runtime: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            KUBETRAIN,
            "run",
            str(manifest),
            "--state-dir",
            str(state_dir),
            "--grace-period",
            "5",
            "--runtime",
            runtime,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def succeeded(run: Run) -> bool:
    return run.returncode == 0 and run.condition("Succeeded") is not None


SLEEPER = "import time; print('up', flush=True); time.sleep(600)"


def test_the_pytorch_ddp_example_trains_in_its_image_resolving_the_master_by_its_kubernetes_name(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    require_image(runtime, PYTORCH_IMAGE)
    run = kubetrain_run(REPO / "examples/pytorch-ddp/job.yaml", state_dir, extra=("--runtime", runtime))

    assert succeeded(run), run.stderr[-3000:]
    for replica, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        joined = f"rank {rank}/3 joined the process group via pytorch-ddp-master-0:23456, training on cpu"
        assert joined in run.lines_of(replica)
    # Rank 0 reported from the image (its copy of kubetrain.reporting) to the run's endpoint on the host.
    status = run.job_status["trainerStatus"]
    assert status["progressPercentage"] == 100
    [loss] = [float(m["value"]) for m in status["metrics"] if m["name"] == "loss"]
    assert f"step 59 loss {loss:.5f}" in run.lines_of("master-0")


def test_the_xgboost_example_trains_in_its_image_with_the_tracker_on_the_masters_name(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    require_image(runtime, XGBOOST_IMAGE)
    run = kubetrain_run(REPO / "examples/xgboost/job.yaml", state_dir, extra=("--runtime", runtime))

    assert succeeded(run), run.stderr[-3000:]
    assert any(line.startswith("rank 2 logloss") for line in run.lines_of("worker-1")), run.stdout[-2000:]
    assert run.job_status["trainerStatus"]["progressPercentage"] == 100, "the master's callback reported"


def test_the_mpi_example_allreduces_over_every_rank_by_mpirun_over_ssh_into_the_worker_containers(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    require_image(runtime, MPI_IMAGE)
    manifest = yaml.safe_load((REPO / "examples/mpi/job.yaml").read_text())
    for replica in manifest["spec"]["mpiReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["image"] = MPI_IMAGE

    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir, extra=("--runtime", runtime))

    assert succeeded(run), run.stderr[-3000:]
    logs = subprocess.run(
        [KUBETRAIN, "logs", "mpi-allreduce", "--local", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ranks = re.findall(
        r"^launcher \| rank (\d) of 4 on (\S+): allreduce of ranks = 6 \(expected 6\)$", logs, re.M
    )
    # Two slots per worker: ranks 0-1 in worker-0, 2-3 in worker-1, reached by their Kubernetes names.
    assert sorted(ranks) == [
        ("0", "mpi-allreduce-worker-0"),
        ("1", "mpi-allreduce-worker-0"),
        ("2", "mpi-allreduce-worker-1"),
        ("3", "mpi-allreduce-worker-1"),
    ], logs


def test_a_replica_failing_under_on_failure_is_restarted_in_place_and_keeps_its_empty_dir(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    code = (
        "import os, sys\n"
        "if os.path.exists('/scratch/tried'): sys.exit(0)\n"
        "open('/scratch/tried', 'w').close(); sys.exit(3)\n"
    )
    manifest = write_manifest(tmp_path, python_job("retried", {"Master": (1, code)}, "OnFailure"))

    run = kubetrain_run(manifest, state_dir, extra=("--runtime", runtime))

    assert succeeded(run), run.stderr[-3000:]
    assert run.replica("master-0")["exit_codes"] == [3, 0]
    assert run.replica("master-0")["restarts"] == 1


def with_init_container(manifest: dict[str, Any], code: str) -> dict[str, Any]:
    """Every replica gets an init container running ``python -c CODE`` with the same scratch volume."""
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["initContainers"] = [
            {
                "name": "prepare",
                "image": PYTHON_IMAGE,
                "command": ["python", "-c", code],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            }
        ]
    return manifest


def test_an_init_container_runs_to_completion_first_and_leaves_its_files_in_the_shared_volume(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    main = "print('main read', open('/scratch/prepared').read(), flush=True)"
    manifest = with_init_container(
        python_job("init-ok", {"Master": (1, main)}), "open('/scratch/prepared', 'w').write('by init')"
    )

    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir, extra=("--runtime", runtime))

    assert succeeded(run), run.stderr[-3000:]
    assert "main read by init" in run.lines_of("master-0")


def test_a_failing_init_container_fails_the_replica_with_its_exit_code_and_the_main_never_starts(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    manifest = with_init_container(
        python_job("init-fails", {"Master": (1, "print('main ran', flush=True)")}), "import sys; sys.exit(4)"
    )

    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir, extra=("--runtime", runtime))

    assert run.condition("Failed") is not None, run.stderr[-3000:]
    assert run.replica("master-0")["exit_codes"] == [4]
    assert "main ran" not in run.lines_of("master-0")


def test_ctrl_c_removes_every_container_and_the_network(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    manifest = write_manifest(
        tmp_path, python_job("ctrl-c", {"Master": (1, SLEEPER), "Worker": (2, SLEEPER)})
    )
    runner = start(manifest, state_dir, runtime)
    wait_for(lambda: len(running_containers_of("ctrl-c", runtime)) == 3, "three containers running")

    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=PATIENCE)

    assert runner.returncode == 130, stderr
    assert containers_of("ctrl-c", runtime) == []
    assert not network_exists("ctrl-c", runtime)


def test_a_sigkilled_kubetrain_leaves_no_container_once_the_reaper_runs(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    manifest = write_manifest(
        tmp_path, python_job("killed", {"Master": (1, SLEEPER), "Worker": (1, SLEEPER)})
    )
    runner = start(manifest, state_dir, runtime)
    wait_for(lambda: len(running_containers_of("killed", runtime)) == 2, "two containers running")

    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=PATIENCE)

    wait_for(
        lambda: containers_of("killed", runtime) == [] and not network_exists("killed", runtime),
        "the killed run's containers and network removed",
    )
