"""``kubetrain migrate`` of every v1 example that maps, then ``kubetrain run`` of the TrainJob it wrote: the
same processes find each other as the v1 job's did and end the same way, now as a TrainJob's nodes."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from kubetrain.api.common import JobStatus
from kubetrain.local.trainjob import trainjob_status
from local.local_run import KUBETRAIN, REPO, Run, kubetrain_run, write_manifest
from local.test_examples import assert_succeeded, example, losses

pytestmark = pytest.mark.local


def assert_complete(run: Run) -> None:
    """The run succeeded, and the TrainJob status made of it reads ``Complete``."""
    assert_succeeded(run)
    status = trainjob_status(JobStatus.model_validate(run.job_status), datetime.now(UTC))
    assert status.is_true("Complete"), status


def migrated(tmp_path: Path, name: str, checkpoints: Path | None = None) -> Path:
    """The example (its checkpoints in ``checkpoints``) as ``kubetrain migrate`` writes it, in a file."""
    v1 = write_manifest(tmp_path, example(name, checkpoints))
    path = tmp_path / "trainjob.yaml"
    with path.open("w") as out:  # as docs/cli.md shows it: kubetrain migrate job.yaml > trainjob.yaml
        subprocess.run([KUBETRAIN, "migrate", str(v1)], cwd=REPO, stdout=out, check=True)
    assert [d["kind"] for d in yaml.safe_load_all(path.read_text())][-1] == "TrainJob"
    return path


def test_migrated_pytorch_ddp_trains_over_gloo_with_three_ranks_under_torchrun(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(migrated(tmp_path, "pytorch-ddp", tmp_path / "ckpt"), state_dir)
    assert_complete(run)
    joined = {m for line in run.stdout.splitlines() for m in re.findall(r"rank (\d)/3 joined", line)}
    assert joined == {"0", "1", "2"}
    seen = losses(run.lines_of("node-0"))
    assert len(seen) >= 10 and seen[-1] < 0.75 * seen[0]
    assert (tmp_path / "ckpt" / "model.pt").exists()


def test_migrated_elastic_pytorch_trains_on_its_three_workers_with_static_rendezvous(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(migrated(tmp_path, "pytorch-elastic", tmp_path / "ckpt"), state_dir)
    assert_complete(run)
    for node in ("node-0", "node-1", "node-2"):
        assert any(re.fullmatch(r"rank \d of 3 joined .*", line) for line in run.lines_of(node)), node
    assert "training finished" in run.lines_of("node-0")


def test_migrated_xgboost_finds_its_tracker_by_v1s_names_and_trains_one_booster(
    tmp_path: Path, state_dir: Path
) -> None:
    run = kubetrain_run(migrated(tmp_path, "xgboost"), state_dir)
    assert_complete(run)
    allreduced = [line for line in run.stdout.splitlines() if "allreduce of ranks = 3" in line]
    assert len(allreduced) == 3
    (result,) = [line for line in run.lines_of("node-0") if "logloss" in line]
    first, last = map(float, re.findall(r"first ([\d.]+) last ([\d.]+)", result)[0])
    assert last < first


def test_migrated_jax_processes_psum_across_the_coordinator_by_v1s_names(
    tmp_path: Path, state_dir: Path
) -> None:
    run: Run = kubetrain_run(migrated(tmp_path, "jax"), state_dir)
    assert_complete(run)
    for node, process in (("node-0", 0), ("node-1", 1)):
        lines = run.lines_of(node)
        assert f"process {process} of 2, 2 devices in all" in lines
        assert f"process {process}: psum = 3 (expected 3)" in lines


def test_migrated_mpi_runs_one_rank_per_slot_from_its_launcher_alone(tmp_path: Path, state_dir: Path) -> None:
    run = kubetrain_run(migrated(tmp_path, "mpi"), state_dir)
    assert_complete(run)
    assert [r["name"] for r in run.status_record["replicas"]] == ["launcher-0"], "the nodes are not processes"
    assert (state_dir / "mpi-allreduce" / "config" / "hostfile").read_text() == "localhost slots=4\n"
    results = sorted(line for line in run.lines_of("launcher-0") if "allreduce of ranks" in line)
    assert [line.split(" of ")[0] for line in results] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert all(line.endswith("allreduce of ranks = 6 (expected 6)") for line in results)
