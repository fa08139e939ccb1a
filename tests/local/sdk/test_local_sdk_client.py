"""TrainingClient(backend="local"): real runs, answered from the state directory."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.jobs import TrainingJob
from kubetrain.sdk import JobExistsError, JobFailedError, JobNotFoundError, TrainingClient
from local.local_run import master_last
from waiting import PATIENCE

pytestmark = pytest.mark.local


def stop_every_run(state_dir: Path) -> None:
    """A test that fails half-way must not leave its runs (and their replicas) behind."""
    client = TrainingClient(backend="local", state_dir=state_dir)
    for job in client.list_jobs(all_kinds=True):
        client.delete_job(job.name, job_kind=job.KIND)


def python_replica(code: str, replicas: int = 1, restart_policy: str = "Never") -> dict[str, Any]:
    return {
        "replicas": replicas,
        "restartPolicy": restart_policy,
        "template": {
            "spec": {
                "containers": [
                    {"name": "pytorch", "image": "unused", "command": [sys.executable, "-c", code]}
                ]
            }
        },
    }


def pytorch_job(name: str, master: str, worker: str | None = None, workers: int = 2) -> dict[str, Any]:
    specs = {"Master": python_replica(master)}
    if worker is not None:
        specs["Worker"] = python_replica(worker, workers)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }


PRINT_RANK = "import os\nfor step in range(3): print(f'rank={os.environ[\"RANK\"]} step={step}')"


def ranks(directory: Path, workers: int = 2) -> tuple[str, str]:
    """(master, worker) scripts printing their steps, the master once every worker has ended."""
    return master_last(directory, PRINT_RANK, workers)


SLEEP = "import time; time.sleep(600)"


def wait(client: TrainingClient, name: str, *expected: str) -> TrainingJob:
    conditions = set(expected or ("Succeeded",))
    job = client.wait_for_job_conditions(
        name, expected_conditions=conditions, wait_timeout=PATIENCE, polling_interval=0.1
    )
    assert isinstance(job, TrainingJob)
    return job


def train_with_parameters(parameters: dict[str, float]) -> None:
    for step in range(2):
        print(f"step={step} lr={parameters['lr']}")


FAIL = "import sys; print('giving up'); sys.exit(3)"


@pytest.fixture
def client(state_dir: Path) -> Iterator[TrainingClient]:
    client = TrainingClient(backend="local", state_dir=state_dir)
    yield client
    stop_every_run(state_dir)


def test_a_function_job_runs_to_succeeded_and_logs_each_line(client: TrainingClient) -> None:
    client.create_job(name="fn", train_func=train_with_parameters, parameters={"lr": 0.5}, num_workers=1)
    job = wait(client, "fn")
    assert client.is_job_succeeded(job=job)
    logs, _ = client.get_job_logs("fn")
    assert logs == {"fn-master-0": "step=0 lr=0.5\nstep=1 lr=0.5\n"}


def test_a_job_object_runs_every_replica_and_their_logs_stream_line_by_line(
    client: TrainingClient, tmp_path: Path
) -> None:
    client.create_job(pytorch_job("ranks", *ranks(tmp_path / "printed"), workers=2))
    wait(client, "ranks")
    lines = sorted(client.stream_job_logs("ranks", follow=True))
    assert lines == sorted(
        (f"ranks-{pod}", f"rank={rank} step={step}")
        for pod, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2))
        for step in range(3)
    )


def test_following_logs_streams_a_running_job_until_it_ends(client: TrainingClient) -> None:
    client.create_job(
        pytorch_job("follow", "import time\nfor i in range(3):\n print(i, flush=True); time.sleep(0.3)")
    )
    lines = [line for _, line in client.stream_job_logs("follow", follow=True)]
    assert lines == ["0", "1", "2"]
    assert client.is_job_succeeded("follow")


def test_a_failing_job_raises_with_the_failed_conditions_message(client: TrainingClient) -> None:
    client.create_job(pytorch_job("boom", FAIL))
    with pytest.raises(JobFailedError, match=r"boom failed: .+") as info:
        wait(client, "boom")
    failed = client.get_job_conditions("boom")[-1]
    assert failed.type == "Failed"
    assert failed.message and failed.message in str(info.value)


def test_waiting_for_failed_returns_the_failed_job(client: TrainingClient) -> None:
    client.create_job(pytorch_job("boom", FAIL))
    job = wait(client, "boom", "Failed")
    assert client.is_job_failed(job=job)


def test_waiting_past_the_timeout_raises_timeout_error(client: TrainingClient) -> None:
    client.create_job(pytorch_job("slow", SLEEP))
    with pytest.raises(TimeoutError, match="slow"):
        # A job that sleeps for 10 minutes: no load makes it finish within the half second.
        client.wait_for_job_conditions("slow", wait_timeout=0.5, polling_interval=0.1)
    client.delete_job("slow")


def test_deleting_a_running_job_stops_it_and_forgets_it(client: TrainingClient, state_dir: Path) -> None:
    client.create_job(pytorch_job("doomed", SLEEP))
    wait(client, "doomed", "Running")
    client.delete_job("doomed")
    assert client.list_jobs() == []
    assert not (state_dir / "doomed").exists()
    with pytest.raises(JobNotFoundError):
        client.get_job("doomed")


def test_a_second_job_of_the_same_name_is_refused_while_the_first_runs(client: TrainingClient) -> None:
    client.create_job(pytorch_job("once", SLEEP))
    try:
        with pytest.raises(JobExistsError, match="already running locally"):
            client.create_job(pytorch_job("once", SLEEP))
    finally:
        client.delete_job("once")


def test_pods_are_selected_by_replica_type_in_any_case(client: TrainingClient, tmp_path: Path) -> None:
    client.create_job(pytorch_job("pods", *ranks(tmp_path / "printed"), workers=2))
    wait(client, "pods")
    assert client.get_job_pod_names("pods", replica_type="WORKER") == ["pods-worker-0", "pods-worker-1"]
    assert client.get_job_pod_names("pods", is_master=True) == ["pods-master-0"]
    assert {p.status.phase for p in client.get_job_pods("pods") if p.status} == {"Succeeded"}


def test_suspending_a_local_run_holds_it_and_resuming_runs_it_to_the_end(
    client: TrainingClient, tmp_path: Path
) -> None:
    # It cannot end before the test has suspended it: it prints once the file ``go`` exists.
    go = tmp_path / "go"
    held = (
        f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists():\n    time.sleep(0.05)\n"
        "print('done')"
    )
    client.create_job(pytorch_job("held", held))
    client.suspend_job("held")
    wait(client, "held", "Suspended")
    assert client.get_job_pod_names("held") == ["held-master-0"]
    client.resume_job("held")
    go.touch()
    wait(client, "held")
    assert client.get_job_logs("held")[0] == {"held-master-0": "done\n"}


def test_the_job_kind_is_checked_when_reading_a_run(client: TrainingClient) -> None:
    client.create_job(name="fn", train_func=train_with_parameters, parameters={"lr": 1.0}, num_workers=1)
    with pytest.raises(JobNotFoundError):
        client.get_job("fn", job_kind="TFJob")


def test_following_logs_prints_each_line_as_upstream_and_returns_them(
    client: TrainingClient, capsys: pytest.CaptureFixture[str]
) -> None:
    client.create_job(pytorch_job("printed", "print('one')\nprint('two')"))
    logs, events = client.get_job_logs("printed", follow=True, verbose=True)
    assert capsys.readouterr().out == "[Pod printed-master-0]: one\n[Pod printed-master-0]: two\n"
    assert logs == {"printed-master-0": "one\ntwo\n"}
    assert "PyTorchJob/printed" in events


def test_a_callback_sees_the_job_at_every_poll(client: TrainingClient) -> None:
    seen: list[str] = []
    client.create_job(pytorch_job("watched", "print('x')"))
    client.wait_for_job_conditions(
        "watched", polling_interval=0.1, wait_timeout=PATIENCE, callback=lambda job: seen.append(job.name)
    )
    assert seen and set(seen) == {"watched"}


def test_scaling_a_local_run_restarts_it_with_the_new_worker_count(client: TrainingClient) -> None:
    client.create_job(pytorch_job("wide", SLEEP, SLEEP, workers=1))
    try:
        scaled = client.scale_job("wide", 2)
        assert scaled.replica_specs["Worker"].replicas == 2
        assert client.get_job_pod_names("wide", replica_type="worker") == ["wide-worker-0", "wide-worker-1"]
    finally:
        client.delete_job("wide")


def test_restarts_count_each_in_place_restart_of_a_replica(client: TrainingClient, tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    fail_once = (
        f"import pathlib, sys\nm = pathlib.Path({str(marker)!r})\nif not m.exists(): m.touch(); sys.exit(1)"
    )
    job = pytorch_job("restarts", fail_once)
    job["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "OnFailure"
    client.create_job(job)

    finished = wait(client, "restarts")

    assert client.get_job_restarts("restarts") == 1
    assert sum(s.restarts for s in finished.status.replica_statuses.values()) == 0  # none replaced
