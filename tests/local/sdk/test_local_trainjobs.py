"""Kubeflow Trainer TrainJobs run on this machine, read back by kubetrain's own commands and SDK beside the v1
jobs: every node a real process of the runtime's JobSet, shown as the TrainJob (never as the run carrying it
out), with Trainer's states, its nodes, its logs per node, its progress and its JobSet's jobs."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import cli_runner
from kubetrain.api.trainer import TrainJob
from kubetrain.cli.main import app
from kubetrain.sdk import JobFailedError, TrainingClient
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.local

KUBETRAIN = Path(sys.executable).parent / "kubetrain"

RANKS = (
    "import os\nfor step in range(2): print(f'node={os.environ[\"PET_NODE_RANK\"]} step={step}', flush=True)"
)
FAILS = "import os, sys\nif os.environ['PET_NODE_RANK'] == '1': sys.exit('bad batch size: 0')"
SLEEPS = "import time\nprint('training', flush=True)\ntime.sleep(600)"
REPORTS = (
    "import os, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "if os.environ['PET_NODE_RANK'] == '0':\n"
    "    reporter = ProgressReporter()\n"
    "    for step in range(1, 5):\n"
    "        reporter.report_step(step, 4, {'loss': 1 / step})\n"
    "        reporter.flush()\n"
    "        time.sleep(0.3)\n"
    "    reporter.close()\n"
)


def trainjob(name: str, code: str, nodes: int = 2, runtime: str = "torch-distributed") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {"numNodes": nodes, "command": [sys.executable, "-c", code]},
        },
    }


def manifest(tmp_path: Path, *documents: dict[str, Any]) -> Path:
    path = tmp_path / f"{documents[0]['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


@pytest.fixture
def client(state_dir: Path) -> Iterator[TrainingClient]:
    client = TrainingClient(backend="local", state_dir=state_dir)
    yield client
    for job in client.list_jobs(all_kinds=True):  # a failed test leaves no run behind
        client.delete_job(job.name, job_kind=job.KIND)


@pytest.fixture
def kubetrain(state_dir: Path, client: TrainingClient) -> Any:
    runner = cli_runner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, [*args, "--local", "--state-dir", str(state_dir)])

    return invoke


def test_a_trainjob_run_in_the_foreground_is_listed_as_that_trainjob(
    kubetrain: Any, state_dir: Path, tmp_path: Path
) -> None:
    path = manifest(tmp_path, trainjob("ran", RANKS))
    finished = subprocess.run(
        [str(KUBETRAIN), "run", str(path), "--state-dir", str(state_dir), "-q"],
        capture_output=True,
        text=True,
    )
    assert finished.returncode == 0, finished.stderr
    listing = kubetrain("get").stdout.splitlines()
    assert re.match(r"ran\s+TrainJob\s+Complete\s+-\s+-\s+node 0/2\s+0\s+\d+s", listing[1]), listing
    shown = yaml.safe_load(kubetrain("get", "trainjob", "ran", "-o", "yaml").stdout)
    assert (shown["apiVersion"], shown["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert [c["type"] for c in shown["status"]["conditions"]] == ["Complete"]
    assert "JobSetRun" not in kubetrain("get", "-o", "yaml").stdout


def test_submit_wait_get_and_logs_of_every_node_of_a_local_trainjob(kubetrain: Any, tmp_path: Path) -> None:
    submitted = kubetrain("submit", str(manifest(tmp_path, trainjob("ranks", RANKS))))
    assert submitted.stdout == "trainjob.trainer.kubeflow.org/ranks created\n"
    waited = kubetrain("wait", "trainjob/ranks", "--for=condition=Complete", f"--timeout={PATIENCE:g}s")
    assert (waited.exit_code, waited.stdout) == (0, "trainjob.trainer.kubeflow.org/ranks condition met\n")
    listing = kubetrain("get", "trainjobs").stdout.splitlines()
    assert listing[0].split() == ["NAME", "STATE", "PROGRESS", "ETA", "NODES", "RESTARTS", "AGE"]
    assert re.match(r"ranks\s+Complete\s+-\s+-\s+0/2\s+0\s+\d+s", listing[1])
    assert kubetrain("logs", "ranks").stdout.splitlines() == [
        f"node-{node} | node={node} step={step}" for node in (0, 1) for step in range(2)
    ]
    assert kubetrain("logs", "ranks", "--replica", "node-1").stdout == "node=1 step=0\nnode=1 step=1\n"
    assert kubetrain("logs", "ranks", "--master", "--tail", "1").stdout == "node-0 | node=0 step=1\n"
    missing = kubetrain("logs", "ranks", "--replica", "node-2")
    assert missing.exit_code == 2
    assert "job ranks has no replica 'node-2'; it has: node-0, node-1" in missing.stderr


def test_following_a_trainjobs_logs_prints_every_nodes_lines_until_it_ends(
    kubetrain: Any, tmp_path: Path
) -> None:
    slow = f"import time; time.sleep(2)\n{RANKS}"
    kubetrain("submit", str(manifest(tmp_path, trainjob("followed", slow))))
    followed = kubetrain("logs", "followed", "-f")
    assert followed.exit_code == 0
    assert sorted(followed.stdout.splitlines()) == [
        f"node-{node} | node={node} step={step}" for node in (0, 1) for step in range(2)
    ]


def test_describe_of_a_local_trainjob_shows_its_runtime_jobs_nodes_and_conditions(
    kubetrain: Any, tmp_path: Path
) -> None:
    kubetrain("submit", str(manifest(tmp_path, trainjob("told", RANKS))))
    kubetrain("wait", "told", "--for=condition=Complete", f"--timeout={PATIENCE:g}s")
    text = kubetrain("describe", "trainjob", "told").stdout
    assert "Kind:          TrainJob (trainer.kubeflow.org/v1alpha1)" in text
    assert "State:         Complete" in text
    assert "Runtime:       ClusterTrainingRuntime torch-distributed" in text
    assert re.search(
        r"Jobs:\n  NAME +READY +ACTIVE +SUCCEEDED +FAILED +SUSPENDED\n  node +0 +0 +1 +0 +0\n", text
    )
    assert re.search(r"told-node-0-1 +node-1 +Succeeded", text)
    assert re.search(r"Complete +True +AllJobsCompleted +\d+s +jobset completed successfully", text)
    assert "JobSetRun" not in text


def test_a_failed_trainjob_ends_the_wait_for_complete_with_its_failure(
    kubetrain: Any, tmp_path: Path
) -> None:
    kubetrain("submit", str(manifest(tmp_path, trainjob("broken", FAILS))))
    waited = kubetrain("wait", "broken", "--for=condition=Complete", f"--timeout={PATIENCE:g}s")
    assert waited.exit_code == 1
    # A node's Job retries its pod until its backoff limit is spent; then the JobSet, and the TrainJob, fail.
    assert "TrainJob default/broken failed: " in waited.stderr
    assert "jobset failed due to one or more job failures" in waited.stderr
    assert re.match(r"broken\s+TrainJob\s+Failed\s", kubetrain("get").stdout.splitlines()[1])
    assert "node-1 | bad batch size: 0" in kubetrain("logs", "broken").stdout


def test_a_local_trainjob_is_suspended_resumed_and_deleted(kubetrain: Any, tmp_path: Path) -> None:
    kubetrain("submit", str(manifest(tmp_path, trainjob("pausable", SLEEPS))))
    assert kubetrain("wait", "pausable", "--for=condition=Running", f"--timeout={PATIENCE:g}s").exit_code == 0
    assert (
        kubetrain("suspend", "trainjob", "pausable").stdout
        == "trainjob.trainer.kubeflow.org/pausable suspended\n"
    )
    assert (
        kubetrain("wait", "pausable", "--for=condition=Suspended", f"--timeout={PATIENCE:g}s").exit_code == 0
    )
    assert re.match(
        r"pausable\s+Suspended\s+-\s+-\s+0/2\s", kubetrain("get", "trainjobs").stdout.splitlines()[1]
    )
    kubetrain("resume", "trainjob/pausable")
    assert kubetrain("wait", "pausable", "--for=condition=Running", f"--timeout={PATIENCE:g}s").exit_code == 0
    deleted = kubetrain("delete", "trainjob", "pausable")
    assert deleted.stdout == 'trainjob.trainer.kubeflow.org "pausable" deleted\n'
    assert kubetrain("get").stderr == "No jobs found in local runs.\n"


def test_a_local_trainjob_runs_on_the_runtime_its_file_holds(kubetrain: Any, tmp_path: Path) -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "plain"},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}
                                },
                            },
                        }
                    ]
                }
            },
        },
    }
    job = trainjob("plain-one", "import os; print('nodes', os.environ.get('PET_NNODES', 'none'))", nodes=1)
    job["spec"]["runtimeRef"] = {"name": "plain", "kind": "TrainingRuntime"}
    kubetrain("submit", str(manifest(tmp_path, job, runtime)))
    assert (
        kubetrain("wait", "plain-one", "--for=condition=Complete", f"--timeout={PATIENCE:g}s").exit_code == 0
    )
    assert kubetrain("logs", "plain-one").stdout == "node-0 | nodes none\n"


def test_the_sdk_creates_waits_for_and_reads_a_local_trainjob(client: TrainingClient) -> None:
    created = client.create_job(trainjob("sdk", REPORTS))
    assert isinstance(created, TrainJob)
    done = client.wait_for_job_conditions(
        "sdk", job_kind="TrainJob", polling_interval=0.2, wait_timeout=PATIENCE
    )
    assert isinstance(done, TrainJob) and done.status.is_true("Complete")
    assert client.get_job_state("sdk", job_kind="TrainJob") == "Complete"
    assert client.is_job_succeeded("sdk", job_kind="trainjob")
    assert [(j.KIND, j.name) for j in client.list_jobs(all_kinds=True)] == [("TrainJob", "sdk")]
    assert done.status.trainer_status is not None and done.status.trainer_status.progress_percentage == 100
    history = client.get_job_progress_history("sdk", job_kind="TrainJob")
    assert [p.metrics["loss"] for p in history.points] == [1 / step for step in range(1, 5)]
    assert client.get_job_pod_names("sdk", job_kind="TrainJob") == ["sdk-node-0-0", "sdk-node-0-1"]
    assert client.get_job_replicas("sdk", job_kind="TrainJob") == {
        "sdk-node-0-0": "node-0",
        "sdk-node-0-1": "node-1",
    }
    client.delete_job("sdk", job_kind="TrainJob")
    assert client.list_jobs(all_kinds=True) == []


# Reports once, then stays silent until the file named after it exists, then reports its end.
SILENT_UNTIL = (
    "import pathlib, sys, time\n"
    "from kubetrain.reporting import ProgressReporter\n"
    "reporter = ProgressReporter()\n"
    "reporter.report(40, metrics={'loss': 0.7})\n"
    "reporter.flush()\n"
    "while not pathlib.Path(sys.argv[1]).exists():\n"
    "    time.sleep(0.1)\n"
    "reporter.report(100, metrics={'loss': 0.3})\n"
    "reporter.close()\n"
)


def test_a_silent_trainjob_past_its_progress_deadline_is_stalled_and_diagnosed(
    client: TrainingClient, kubetrain: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    job = trainjob("quiet", SILENT_UNTIL, nodes=1)
    job["spec"]["trainer"]["command"].append(str(go))
    job["metadata"]["annotations"] = {"kubetrain.dev/progress-deadline-seconds": "2"}
    client.create_job(job)
    client.wait_for_job_conditions(
        "quiet", job_kind="TrainJob", expected_conditions={"Running"}, wait_timeout=PATIENCE
    )
    eventually(
        lambda: client.get_job_state("quiet", job_kind="TrainJob") == "Stalled", "the TrainJob Stalled"
    )
    [finding] = client.get_job_diagnosis("quiet", job_kind="TrainJob")
    assert finding.reason == "ProgressDeadlineExceeded"
    assert finding.message.startswith("TrainJob quiet has had no progress report since")
    assert finding.replicas == ("quiet-node-0-0",)
    assert kubetrain("describe", "quiet").stdout.startswith(
        "Diagnosis:\n  ProgressDeadlineExceeded: TrainJob quiet"
    )
    go.touch()
    client.wait_for_job_conditions("quiet", job_kind="TrainJob", wait_timeout=PATIENCE, polling_interval=0.2)
    assert client.get_job_diagnosis("quiet", job_kind="TrainJob") == []


def test_the_sdk_reads_a_trainjobs_logs_from_node_0_by_default(client: TrainingClient) -> None:
    client.create_job(trainjob("logged", RANKS))
    client.wait_for_job_conditions("logged", job_kind="TrainJob", polling_interval=0.2, wait_timeout=PATIENCE)
    logs, _ = client.get_job_logs("logged", job_kind="TrainJob")
    assert logs == {"logged-node-0-0": "node=0 step=0\nnode=0 step=1\n"}
    every = {
        pod: line for pod, line in client.stream_job_logs("logged", job_kind="TrainJob", replica_index=1)
    }
    assert every == {"logged-node-0-1": "node=1 step=1"}


def test_the_sdk_raises_the_trainjobs_failure_while_waiting_for_complete(client: TrainingClient) -> None:
    client.create_job(trainjob("fails", FAILS))
    with pytest.raises(
        JobFailedError, match=r"TrainJob default/fails failed: jobset failed due to one or more job failures"
    ):
        client.wait_for_job_conditions(
            "fails", job_kind="TrainJob", polling_interval=0.2, wait_timeout=PATIENCE
        )


def test_a_local_trainjob_whose_runtime_is_nowhere_is_refused_naming_the_field(
    client: TrainingClient,
) -> None:
    with pytest.raises(Exception, match=r"spec.runtimeRef.name: ClusterTrainingRuntime 'nowhere'"):
        client.create_job(trainjob("lost", RANKS, runtime="nowhere"))
    assert client.list_jobs(all_kinds=True) == []
