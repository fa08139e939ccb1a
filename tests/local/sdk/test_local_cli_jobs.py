"""The kubectl-like commands with --local: real runs started by `submit --local`, read back by the others."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.sdk import TrainingClient
from local.local_run import master_last
from waiting import PATIENCE, eventually

pytestmark = pytest.mark.local


def replica(code: str, replicas: int = 1) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "unused-locally", "command": [sys.executable, "-c", code]}
    return {"replicas": replicas, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}


def manifest(tmp_path: Path, name: str, master: str, worker: str | None = None) -> Path:
    specs = {"Master": replica(master)}
    if worker is not None:
        specs["Worker"] = replica(worker, 2)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}}
    job["spec"] = {"pytorchReplicaSpecs": specs}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


RANK = "import os\nfor step in range(2): print(f'rank={os.environ[\"RANK\"]} step={step}')"


def ranks(directory: Path, workers: int = 2) -> tuple[str, str]:
    """(master, worker) scripts printing their steps, the master once every worker has ended."""
    return master_last(directory, RANK, workers)


def held_until(go: Path) -> str:
    """Prints ``done`` once ``go`` exists: a run that cannot end before the test has suspended it."""
    return (
        f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists():\n    time.sleep(0.05)\n"
        "print('done')"
    )


@pytest.fixture
def kubetrain(state_dir: Path) -> Iterator[Any]:
    runner = cli_runner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, [*args, "--local", "--state-dir", str(state_dir)])

    yield invoke
    # A test that fails half-way must not leave its runs (and their replicas) behind.
    client = TrainingClient(backend="local", state_dir=state_dir)
    for job in client.list_jobs(all_kinds=True):
        client.delete_job(job.name, job_kind=job.KIND)


def test_submit_wait_get_and_logs_of_a_local_run(kubetrain: Any, tmp_path: Path) -> None:
    submitted = kubetrain("submit", str(manifest(tmp_path, "demo", *ranks(tmp_path / "printed"))))
    assert submitted.stdout == "pytorchjob.kubeflow.org/demo created\n"
    waited = kubetrain("wait", "demo", "--for=condition=Succeeded", f"--timeout={PATIENCE:g}s")
    assert (waited.exit_code, waited.stdout) == (0, "pytorchjob.kubeflow.org/demo condition met\n")
    listing = kubetrain("get", "pytorchjobs").stdout.splitlines()
    assert listing[0].split() == ["NAME", "STATE", "PROGRESS", "ETA", "REPLICAS", "RESTARTS", "AGE"]
    assert re.match(r"demo\s+Succeeded\s+-\s+-\s+Master 0/1 Worker 0/2\s+0\s+\d+s", listing[1])
    logs = kubetrain("logs", "demo").stdout.splitlines()
    assert logs == [
        f"{replica}-{index} | rank={rank} step={step}"
        for replica, index, rank in (("master", 0, 0), ("worker", 0, 1), ("worker", 1, 2))
        for step in range(2)
    ]
    assert kubetrain("logs", "demo", "--replica", "worker-1").stdout == "rank=2 step=0\nrank=2 step=1\n"
    assert kubetrain("logs", "demo", "-r", "worker-1", "--tail", "1").stdout == "rank=2 step=1\n"


def test_describe_shows_replicas_pods_conditions_and_events(kubetrain: Any, tmp_path: Path) -> None:
    kubetrain("submit", str(manifest(tmp_path, "told", *ranks(tmp_path / "printed"))))
    kubetrain("wait", "told", f"--timeout={PATIENCE:g}s")
    text = kubetrain("describe", "pytorchjob", "told").stdout
    assert "Kind:          PyTorchJob (kubeflow.org/v1)" in text
    assert re.search(r"Worker\s+2\s+0\s+2\s+0\s+Never", text)
    assert re.search(r"told-worker-1\s+Succeeded\s+0", text)
    assert re.search(r"Succeeded\s+True\s+PyTorchJobSucceeded", text)
    assert "PyTorchJob told is successfully completed." in text.split("Events:")[1]


def test_a_local_runs_events_have_their_age_and_repeats_fold_into_one_with_a_count(
    kubetrain: Any, tmp_path: Path, state_dir: Path
) -> None:
    path = manifest(tmp_path, "aged", *ranks(tmp_path / "printed"))
    job = yaml.safe_load(path.read_text())
    # A template restartPolicy is warned about at each replica's creation: twice for the two workers.
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = "Always"
    path.write_text(yaml.safe_dump(job))
    kubetrain("submit", str(path))
    kubetrain("wait", "aged", f"--timeout={PATIENCE:g}s")
    events = TrainingClient(backend="local", state_dir=state_dir).get_job_events("aged")
    assert events and all(event.last_seen is not None for event in events)
    warned = [event for event in events if event.reason == "SetPodTemplateRestartPolicy"]
    assert [event.count for event in warned] == [2]
    rows = kubetrain("describe", "pytorchjob", "aged").stdout.split("Events:")[1].splitlines()[2:]
    assert rows and all(re.match(r"\s+\S+\s+\S+\s+\d+s\s", row) for row in rows), rows


def test_waiting_on_a_failing_job_exits_1_with_the_condition_message(kubetrain: Any, tmp_path: Path) -> None:
    kubetrain("submit", str(manifest(tmp_path, "boom", "raise SystemExit(3)")))
    waited = kubetrain("wait", "pytorchjob/boom", f"--timeout={PATIENCE:g}s")
    assert waited.exit_code == 1
    assert re.fullmatch(r"error: PyTorchJob default/boom failed: .*Master.*\n", waited.stderr)


def test_output_formats_are_yaml_json_and_name(kubetrain: Any, tmp_path: Path) -> None:
    kubetrain("submit", str(manifest(tmp_path, "shapes", "print('hi')")))
    kubetrain("wait", "shapes", f"--timeout={PATIENCE:g}s")
    assert (
        yaml.safe_load(kubetrain("get", "pytorchjob", "shapes", "-o", "yaml").stdout)["kind"] == "PyTorchJob"
    )
    assert '"items"' in kubetrain("get", "-o", "json").stdout
    assert kubetrain("get", "-o", "name").stdout == "pytorchjob.kubeflow.org/shapes\n"


def test_delete_stops_and_forgets_a_run(kubetrain: Any, tmp_path: Path) -> None:
    kubetrain("submit", str(manifest(tmp_path, "doomed", "import time; time.sleep(600)")))
    deleted = kubetrain("delete", "pytorchjob", "doomed")
    assert deleted.stdout == 'pytorchjob.kubeflow.org "doomed" deleted\n'
    assert kubetrain("get", "doomed").exit_code == 1


def test_suspend_and_resume_a_local_run(kubetrain: Any, tmp_path: Path) -> None:
    go = tmp_path / "go"
    kubetrain("submit", str(manifest(tmp_path, "held", held_until(go))))
    assert kubetrain("suspend", "pytorchjob", "held").stdout == "pytorchjob.kubeflow.org/held suspended\n"
    assert kubetrain("wait", "held", "--for=condition=Suspended", f"--timeout={PATIENCE:g}s").exit_code == 0
    assert kubetrain("resume", "held").stdout == "pytorchjob.kubeflow.org/held resumed\n"
    go.touch()
    assert kubetrain("wait", "held", f"--timeout={PATIENCE:g}s").exit_code == 0
    assert kubetrain("logs", "held").stdout == "master-0 | done\n"


def test_a_missing_job_is_a_one_line_error(kubetrain: Any) -> None:
    result = kubetrain("logs", "nothing")
    assert (result.exit_code, result.stderr.count("\n")) == (1, 1)
    assert result.stderr.startswith("error: no job named 'nothing'")


def test_an_invalid_manifest_exits_2_naming_the_field(kubetrain: Any, tmp_path: Path) -> None:
    path = manifest(tmp_path, "bad", "print()")
    path.write_text(path.read_text().replace("restartPolicy: Never", "restartPolicy: Sometimes"))
    result = kubetrain("submit", str(path))
    assert result.exit_code == 2
    assert "spec.pytorchReplicaSpecs.Master.restartPolicy" in result.stderr


def test_an_unknown_kind_exits_2_listing_the_known_kinds(kubetrain: Any) -> None:
    result = kubetrain("describe", "sparkjob", "x")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown job kind 'sparkjob'; known kinds: PyTorchJob")


def test_a_dry_run_prints_the_defaulted_job_and_starts_nothing(
    kubetrain: Any, tmp_path: Path, state_dir: Path
) -> None:
    result = kubetrain("submit", str(manifest(tmp_path, "draft", "print()")), "--dry-run")
    printed = yaml.safe_load(result.stdout)
    assert printed["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    assert printed["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"]
    assert list(state_dir.iterdir()) == []


def test_watching_prints_a_row_each_time_the_job_changes(state_dir: Path, tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "kubetrain"),
        "get",
        "--local",
        "-w",
        "--state-dir",
        str(state_dir),
    ]
    watcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    printed: list[str] = []

    def read() -> None:
        for line in watcher.stdout or ():
            printed.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def states() -> list[str]:
        return [line.split()[2] for line in list(printed) if line.startswith("seen ")]

    try:
        client = TrainingClient(backend="local", state_dir=state_dir)
        # Running until the watcher has shown it: it polls every WATCH_INTERVAL in its own time, and a
        # job that ran for a fixed while could come and go between two polls on a loaded machine.
        go = tmp_path / "go"
        client.create_job(yaml.safe_load(manifest(tmp_path, "seen", held_until(go)).read_text()))
        eventually(lambda: "Running" in states(), "the watcher's Running row")
        go.touch()
        client.wait_for_job_conditions("seen", polling_interval=0.2, wait_timeout=PATIENCE)
        eventually(lambda: "Succeeded" in states(), "the watcher's Succeeded row")
    finally:
        watcher.terminate()
        watcher.wait(timeout=PATIENCE)
        reader.join(PATIENCE)
    assert states()[-1] == "Succeeded"
    assert "Running" in states()
