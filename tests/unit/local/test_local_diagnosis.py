"""What the local runner gives diagnosis: each attempt's last lines, an OOM kill the kernel logged, an image
that cannot be had; and its findings kept in status.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders import job
from kubetrain.engine.diagnosis import Finding
from kubetrain.local.container_run import ContainerRun, Mount, PullPolicy
from kubetrain.local.container_run import Engine as EngineKind
from kubetrain.local.containers import (
    ContainerEngine,
    MissingImage,
    image_problem,
    kernel_logged_oom_kill,
    with_absolute_sources,
)
from kubetrain.local.logs import ReplicaLog
from kubetrain.local.state import RunDirectory, RunRecord
from kubetrain.sdk.backends.local import LocalBackend
from kubetrain.sdk.kinds import resolve_kind

CONTAINER_ID = "75c3c15e478b8f68e64994548ba767c217d8d49ea48dbbcc1213b48860334a96"


def log_of(tmp_path: Path, *lines: str) -> ReplicaLog:
    log = ReplicaLog("worker-0", tmp_path / "worker-0.log", lambda prefix, line: None)
    log.open()
    for line in lines:
        log.write(line)
    return log


def test_an_attempts_tail_is_what_it_wrote_after_the_previous_attempt(tmp_path: Path) -> None:
    log = log_of(tmp_path, "first attempt")
    start = log.size()
    log.write("second attempt")
    log.write("Traceback: boom")

    assert log.tail(start) == "second attempt\nTraceback: boom\n"


def test_an_attempt_that_wrote_nothing_has_no_tail(tmp_path: Path) -> None:
    log = log_of(tmp_path, "first attempt")

    assert log.tail(log.size()) is None


def test_a_long_attempts_tail_is_its_end_from_a_whole_line(tmp_path: Path) -> None:
    log = log_of(tmp_path, *(f"line {i:04d}" for i in range(2000)))

    tail = log.tail(0, characters=100)

    assert tail is not None
    assert tail.endswith("line 1999\n")
    assert tail.startswith("line ")
    assert len(tail) <= 100


def kernel_log(tmp_path: Path, *messages: str) -> Path:
    path = tmp_path / "kmsg"
    path.write_text("".join(f"6,{i},100{i},-;{m}\n" for i, m in enumerate(messages)))
    return path


def test_an_oom_kill_the_kernel_logged_in_the_containers_cgroup_is_found(tmp_path: Path) -> None:
    path = kernel_log(
        tmp_path,
        "podman0: port 1(veth0) entered forwarding state",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-x,mems_allowed=0,"
        f"oom_memcg=/libpod_parent/libpod-{CONTAINER_ID},task_memcg=/libpod_parent/libpod-{CONTAINER_ID},"
        "task=python,pid=2611,uid=0",
    )

    assert kernel_logged_oom_kill(CONTAINER_ID, path)


def test_an_oom_kill_in_another_cgroup_is_not_this_containers(tmp_path: Path) -> None:
    path = kernel_log(tmp_path, "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/libpod_parent/libpod-other")

    assert not kernel_logged_oom_kill(CONTAINER_ID, path)


def test_a_kernel_log_that_cannot_be_read_reports_no_oom_kill(tmp_path: Path) -> None:
    assert not kernel_logged_oom_kill(CONTAINER_ID, tmp_path / "missing")


class Engine(ContainerEngine):
    """The engine's CLI answering from a set of present images and a pull error."""

    def __init__(self, present: set[str], pull_error: str | None = None) -> None:
        super().__init__(EngineKind.PODMAN, "podman")
        self.present, self.pull_error = present, pull_error
        self.pulled: list[str] = []

    def has_image(self, image: str) -> bool:
        return image in self.present

    def pull(self, image: str) -> str | None:
        self.pulled.append(image)
        return self.pull_error


def test_a_missing_image_under_pull_policy_never_is_err_image_never_pull_in_the_kubelets_words() -> None:
    assert image_problem(Engine(set()), "localhost/nope:1", PullPolicy.NEVER) == MissingImage(
        "localhost/nope:1",
        PullPolicy.NEVER,
        "ErrImageNeverPull",
        'Container image "localhost/nope:1" is not present with pull policy of Never',
    )


def test_an_image_that_cannot_be_pulled_is_err_image_pull_with_the_engines_error() -> None:
    engine = Engine(set(), pull_error="Error: initializing source docker://nope:1: pinging registry")

    problem = image_problem(engine, "nope:1", PullPolicy.MISSING)

    assert problem is not None
    assert (problem.reason, problem.message) == (
        "ErrImagePull",
        'failed to pull image "nope:1": Error: initializing source docker://nope:1: pinging registry',
    )


def test_a_present_image_is_no_problem_and_is_not_pulled() -> None:
    engine = Engine({"trainer:1"})

    assert image_problem(engine, "trainer:1", PullPolicy.MISSING) is None
    assert engine.pulled == []


FINDING = {
    "reason": "CrashLoop",
    "message": "pod hello-master-0 is in a crash loop",
    "replicas": ["hello-master-0"],
}


def recorded_run(tmp_path: Path, *, finished: bool) -> None:
    wire = job("PyTorchJob", {"Master": 1}, name="hello").to_wire()
    record = RunRecord(
        job=wire,
        replicas=[],
        runner_pid=2**22 + 1,
        runner_started_at=0.0,
        finished=finished,
        findings=[FINDING],
    )
    RunDirectory(tmp_path, "hello").write(record)


def test_the_diagnosis_of_a_local_run_is_what_its_runner_recorded_last(tmp_path: Path) -> None:
    recorded_run(tmp_path, finished=True)

    found = LocalBackend(tmp_path).diagnose(resolve_kind("pytorchjob"), "default", "hello")

    assert found == [Finding("CrashLoop", "pod hello-master-0 is in a crash loop", ("hello-master-0",))]


def test_a_run_whose_runner_is_gone_has_no_current_diagnosis(tmp_path: Path) -> None:
    recorded_run(tmp_path, finished=False)  # its runner's pid is not alive

    assert LocalBackend(tmp_path).diagnose(resolve_kind("pytorchjob"), "default", "hello") == []


def test_an_oom_kill_the_engine_reports_is_one(tmp_path: Path) -> None:
    script = tmp_path / "podman"
    script.write_text('#!/bin/sh\necho "true ' + CONTAINER_ID + '"\n')
    script.chmod(0o755)
    engine = ContainerEngine(EngineKind.PODMAN, str(script))

    assert engine.killed_for_memory("hello-master-0")


def test_a_relative_host_path_is_made_absolute_so_the_engine_may_run_elsewhere(tmp_path: Path) -> None:
    init = ContainerRun(**{**RUN_FIELDS, "mounts": (Mount("./cache", "/cache"),)})
    run = ContainerRun(
        **{**RUN_FIELDS, "mounts": (Mount("data", "/data"), Mount("/srv/x", "/x", True)), "init": (init,)}
    )

    moved = with_absolute_sources(run, tmp_path)

    assert moved.mounts == (Mount(str(tmp_path / "data"), "/data"), Mount("/srv/x", "/x", True))
    assert moved.init[0].mounts == (Mount(str(tmp_path / "cache"), "/cache"),)


RUN_FIELDS: dict[str, Any] = {
    "replica": "master-0",
    "name": "j-master-0",
    "image": "trainer:1",
    "image_field": "spec...image",
    "pull": PullPolicy.NEVER,
    "entrypoint": None,
    "args": (),
    "env": {},
    "working_dir": None,
    "network": "kubetrain-j",
    "aliases": (),
    "labels": {},
}
