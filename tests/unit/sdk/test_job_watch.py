"""The watch contract both backends keep (``JobWatch``), on the local backend's state directory and on the
ledger that turns a re-list into events. The cluster's is proven on a real API server
(tests/cluster/sdk/test_cluster_watch.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from kubetrain.api.summary import NodeTally
from kubetrain.local.state import ReplicaRecord, RunDirectory, RunRecord
from kubetrain.sdk.backends.base import JobWatchEvent, WatchEventType
from kubetrain.sdk.backends.local import LocalBackend
from kubetrain.sdk.backends.local_watch import POLL, LocalJobWatch
from kubetrain.sdk.backends.watching import Listed, WatchLedger
from kubetrain.sdk.kinds import resolve_kind

ADDED, MODIFIED, DELETED, SYNCED = (
    WatchEventType.ADDED,
    WatchEventType.MODIFIED,
    WatchEventType.DELETED,
    WatchEventType.SYNCED,
)


def wire(name: str, kind: str = "PyTorchJob", version: str = "1", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "resourceVersion": version},
        "spec": {},
        "status": status,
    }


def names(events: list[JobWatchEvent]) -> list[tuple[str, str]]:
    return [(str(e.type), str((e.job or {}).get("metadata", {}).get("name", ""))) for e in events]


# --- the ledger ------------------------------------------------------------------------------------


def test_a_first_list_is_told_as_added() -> None:
    ledger = WatchLedger()
    events = ledger.resync([Listed(wire("a"), "1", 0), Listed(wire("b"), "1", 0)])
    assert names(events) == [("ADDED", "a"), ("ADDED", "b")]


def test_a_relist_tells_only_what_changed_meanwhile() -> None:
    ledger = WatchLedger()
    ledger.resync(
        [Listed(wire("same"), "1", 0), Listed(wire("changed"), "1", 0), Listed(wire("gone"), "1", 0)]
    )
    events = ledger.resync(
        [Listed(wire("same"), "1", 0), Listed(wire("changed"), "2", 0), Listed(wire("new"), "1", 0)]
    )
    assert sorted(names(events)) == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]


def test_a_deleted_job_carries_the_job_as_last_seen() -> None:
    ledger = WatchLedger()
    ledger.resync([Listed(wire("a", version="7", conditions=[{"type": "Running"}]), "7", 0)])
    [event] = ledger.resync([])
    assert event.type is DELETED
    assert event.job is not None and event.job["status"]["conditions"] == [{"type": "Running"}]


def test_a_relist_of_one_kind_deletes_nothing_of_another() -> None:
    ledger = WatchLedger()
    ledger.resync([Listed(wire("p"), "1", 0), Listed(wire("t", kind="TFJob"), "1", 0)])
    events = ledger.resync([], lambda key: key[0] == "kubeflow.org/v1/TFJob")
    assert names(events) == [("DELETED", "t")]


def test_a_change_of_restarts_alone_is_a_modification() -> None:
    ledger = WatchLedger()
    ledger.resync([Listed(wire("a"), "1", 0)])
    [event] = ledger.resync([Listed(wire("a"), "1", 2)])
    assert (event.type, event.restarts) == (MODIFIED, 2)


def test_a_change_of_a_trainjobs_nodes_alone_is_a_modification() -> None:
    ledger = WatchLedger()
    ledger.resync([Listed(wire("a", kind="TrainJob"), "1", 0, NodeTally(2, 2, 1))])
    [event] = ledger.resync([Listed(wire("a", kind="TrainJob"), "1", 0, NodeTally(2, 2, 2))])
    assert (event.type, event.nodes) == (MODIFIED, NodeTally(2, 2, 2))
    assert ledger.with_pods(("kubeflow.org/v1/TrainJob", "default", "a"), 0, NodeTally(2, 2, 2)) is None
    changed = ledger.with_pods(("kubeflow.org/v1/TrainJob", "default", "a"), 1, NodeTally(2, 1, 1))
    assert changed is not None and (changed.restarts, changed.nodes) == (1, NodeTally(2, 1, 1))


# --- the local backend's watch ---------------------------------------------------------------------


def me() -> tuple[int, float]:
    """A runner that is alive: this test process."""
    return os.getpid(), psutil.Process().create_time()


def record(
    name: str, *, runner: tuple[int, float] | None = None, finished: bool = False, **status: Any
) -> RunRecord:
    pid, started = runner or me()
    job = wire(name, **status)
    return RunRecord(job, [], runner_pid=pid, runner_started_at=started, finished=finished)


class Collector:
    """The watch iterated on a thread, its events gathered for the test to wait on."""

    def __init__(
        self, backend: LocalBackend, kind: str | None = None, watch: LocalJobWatch | None = None
    ) -> None:
        self.watch = watch or backend.watch(resolve_kind(kind) if kind else None, None)
        self.events: list[JobWatchEvent] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.watch:
                self.events.append(event)
        except BaseException as error:
            self.error = error

    def wait_for(self, type_: WatchEventType, name: str = "", timeout: float = 5.0) -> JobWatchEvent:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.type is type_ and (not name or (event.job or {})["metadata"]["name"] == name):
                    return event
            time.sleep(0.02)
        raise AssertionError(f"no {type_} {name} within {timeout}s; got {names(self.events)}")


@pytest.fixture
def collected(tmp_path: Path) -> Iterator[tuple[Path, Collector]]:
    collector = Collector(LocalBackend(tmp_path))
    yield tmp_path, collector
    collector.watch.close()
    collector.thread.join(5)
    assert not collector.thread.is_alive()


def test_a_local_watch_lists_every_run_then_says_synced(tmp_path: Path) -> None:
    for name in ("a", "b"):
        RunDirectory(tmp_path, name).write(record(name))
    collector = Collector(LocalBackend(tmp_path))
    collector.wait_for(SYNCED)
    collector.watch.close()
    assert sorted(names(collector.events)) == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", "")]
    assert collector.events[-1].type is SYNCED


def test_a_new_run_is_added_and_a_status_change_is_a_modification(collected: tuple[Path, Collector]) -> None:
    state, collector = collected
    collector.wait_for(SYNCED)
    RunDirectory(state, "new").write(record("new"))
    collector.wait_for(ADDED, "new")
    RunDirectory(state, "new").write(record("new", conditions=[{"type": "Running", "status": "True"}]))
    changed = collector.wait_for(MODIFIED, "new")
    assert changed.job is not None and changed.job["status"]["conditions"][0]["type"] == "Running"


def test_a_removed_run_is_deleted_with_its_last_status(collected: tuple[Path, Collector]) -> None:
    state, collector = collected
    RunDirectory(state, "done").write(record("done", finished=True, conditions=[{"type": "Succeeded"}]))
    collector.wait_for(ADDED, "done")
    import shutil

    shutil.rmtree(state / "done")
    deleted = collector.wait_for(DELETED, "done")
    assert deleted.job is not None and deleted.job["status"]["conditions"] == [{"type": "Succeeded"}]


def test_a_run_started_again_in_its_directory_is_modified_not_deleted(
    collected: tuple[Path, Collector],
) -> None:
    # Suspend, resume and every other change of a local run stop it and start a new runner in its directory,
    # which clears the previous run's status before writing its own.
    state, collector = collected
    RunDirectory(state, "again").write(record("again", finished=True, conditions=[{"type": "Failed"}]))
    collector.wait_for(ADDED, "again")
    RunDirectory(state, "again").reset()
    time.sleep(POLL * 5)  # the watch looks several times while the run has no status
    RunDirectory(state, "again").write(record("again", conditions=[{"type": "Suspended", "status": "True"}]))

    changed = collector.wait_for(MODIFIED, "again")

    assert changed.job is not None and changed.job["status"]["conditions"][0]["type"] == "Suspended"
    assert [e for e in collector.events if e.type is DELETED] == []


def test_a_run_directory_left_without_a_status_is_deleted_after_the_grace(tmp_path: Path) -> None:
    collector = Collector(LocalBackend(tmp_path), watch=LocalJobWatch(tmp_path, None, restart_grace=0.5))
    RunDirectory(tmp_path, "stuck").write(record("stuck", finished=True))
    collector.wait_for(ADDED, "stuck")
    RunDirectory(tmp_path, "stuck").reset()  # and no runner ever writes

    deleted = collector.wait_for(DELETED, "stuck")

    collector.watch.close()
    assert deleted.job is not None and deleted.job["metadata"]["name"] == "stuck"


def test_a_run_whose_runner_died_turns_failed_without_its_file_changing(
    collected: tuple[Path, Collector],
) -> None:
    state, collector = collected
    child = psutil.Popen(["sleep", "30"])
    RunDirectory(state, "orphan").write(record("orphan", runner=(child.pid, child.create_time())))
    collector.wait_for(ADDED, "orphan")
    child.kill()
    child.wait()
    failed = collector.wait_for(MODIFIED, "orphan")
    assert failed.job is not None
    assert failed.job["status"]["conditions"][-1]["reason"] == "LocalRunnerGone"


def test_a_local_watch_of_one_kind_shows_only_that_kind(tmp_path: Path) -> None:
    RunDirectory(tmp_path, "torch").write(record("torch"))
    tf = record("tf")
    tf.job["kind"] = "TFJob"
    RunDirectory(tmp_path, "tf").write(tf)
    collector = Collector(LocalBackend(tmp_path), kind="tfjob")
    collector.wait_for(SYNCED)
    collector.watch.close()
    assert names(collector.events) == [("ADDED", "tf"), ("SYNCED", "")]


def test_a_local_trainjob_run_is_watched_as_its_trainjob_with_its_nodes(tmp_path: Path) -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    run = wire("tj", kind="JobSetRun")
    run["apiVersion"] = "kubetrain.dev/v1alpha1"
    run["spec"] = {"trainjob": trainjob, "replicatedJobs": {"node": {"replicas": 1}}}
    pid, started = me()
    node = ReplicaRecord("node-0", "node", 0, None, "Running", 0, None, [], "")
    RunDirectory(tmp_path, "tj").write(RunRecord(run, [node], runner_pid=pid, runner_started_at=started))
    collector = Collector(LocalBackend(tmp_path), kind="trainjob")
    added = collector.wait_for(ADDED, "tj")
    collector.watch.close()
    assert added.job is not None and added.job["kind"] == "TrainJob"
    assert added.nodes == NodeTally(seen=1, active=1, running=1)


def test_a_closed_local_watch_ends_its_iteration(collected: tuple[Path, Collector]) -> None:
    _, collector = collected
    collector.wait_for(SYNCED)
    collector.watch.close()
    collector.thread.join(2)
    assert not collector.thread.is_alive() and collector.error is None
