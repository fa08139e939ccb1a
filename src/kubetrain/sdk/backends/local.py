"""Jobs run on this machine: each ``create`` starts ``kubetrain run`` detached, and every question is answered
from the run's state directory (``status.json`` and per-replica logs).

A run has no API server to edit, so a change to a live run (``update_job``, suspend, resume, scale) stops
the run and starts it again from the changed manifest: replicas restart from scratch, as pods re-created by
the operator would. Namespaces do not separate local runs; a job name names one run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import parse_job
from kubetrain.api.progress import ProgressHistory
from kubetrain.api.summary import is_trainjob, read_time
from kubetrain.api.trainer import TrainingRuntime, TrainJob
from kubetrain.engine.diagnosis import Finding
from kubetrain.engine.failures import FailureRecord
from kubetrain.frameworks.registry import framework_for
from kubetrain.local.runtime import Runtime
from kubetrain.local.state import ReplicaRecord, RunDirectory, RunRecord, default_state_dir, list_runs
from kubetrain.sdk.backends.base import JobEvent, LogLine
from kubetrain.sdk.errors import (
    JobExistsError,
    JobNotFoundError,
    TrainingApiError,
)
from kubetrain.sdk.kinds import Job, JobKind, kind_of
from kubetrain.sdk.selectors import matches

if TYPE_CHECKING:
    # lightkube's import pulls in its HTTP client: only for the annotations, not for every CLI command.
    from lightkube.resources.core_v1 import Pod

    from kubetrain.sdk.backends.base import JobWatch

MANIFEST_FILE = "job.yaml"
RUNNER_LOG_FILE = "runner.log"
RUNNER_START_TIMEOUT = 30.0
STOP_TIMEOUT = 40.0
"""The runner's grace period for its replicas (30 s) plus time to write its last status."""
FOLLOW_POLL = 0.2
LOCAL_NAMESPACE = "default"

_RUN_COMMAND = "from kubetrain.cli.main import app; app()"
"""How the detached runner is started: this interpreter, so it finds this kubetrain and its packages."""


class LocalBackend:
    def __init__(
        self, state_dir: Path | None = None, cwd: Path | None = None, runtime: str = "process"
    ) -> None:
        self.state_dir = state_dir or default_state_dir()
        self.cwd = cwd
        try:
            self.runtime = Runtime(runtime)
        except ValueError:
            choices = ", ".join(r.value for r in Runtime)
            raise ValueError(f"runtime must be one of {choices}, got {runtime!r}") from None
        self.default_namespace = LOCAL_NAMESPACE
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # --- jobs ----------------------------------------------------------------------------------

    def create(self, job: TrainingJob, *, dry_run: bool = False) -> TrainingJob:
        from kubetrain.engine.admission import admit  # the engine: only for the commands that create

        admitted = admit(job)
        if not admitted.name:
            raise ValueError("metadata.name: Required value: name the job (it names the local run)")
        directory = RunDirectory(self.state_dir, admitted.name)
        self._refuse_running(admitted.name)
        if dry_run:
            return admitted
        self._start(directory, job)
        created = self._job(self._record(directory))
        assert isinstance(created, TrainingJob)
        return created

    def create_trainjob(
        self, trainjob: TrainJob, runtimes: Sequence[Mapping[str, Any]], *, dry_run: bool = False
    ) -> TrainJob:
        """Plan it as ``kubetrain run`` will (its runtime found among ``runtimes`` or the built-in ones), so
        that what cannot run is refused here, naming the field; then start the run with those runtimes."""
        from kubetrain.engine.types import Traits
        from kubetrain.frameworks.addressing import LocalAddressing
        from kubetrain.local.trainjob import parse_runtimes, resolve_runtime
        from kubetrain.local.trainjob import prepare as prepare_run

        runtime = resolve_runtime(trainjob, parse_runtimes(runtimes))
        # Checked on loopback with the containers' own ports: the run allocates free ones when it starts.
        prepare_run(trainjob, runtime, lambda job, keys: LocalAddressing({}), Traits(colocated=True))
        self._refuse_running(trainjob.name)
        if dry_run:
            return trainjob
        directory = RunDirectory(self.state_dir, trainjob.name)
        self._start(directory, trainjob, runtimes)
        created = self._job(self._record(directory))
        assert isinstance(created, TrainJob)
        return created

    def training_runtime(self, trainjob: TrainJob) -> TrainingRuntime:
        """The built-in runtime the TrainJob names (a run started from a file may also name the file's)."""
        from kubetrain.local.trainjob import resolve_runtime

        return resolve_runtime(trainjob, [])

    def _refuse_running(self, name: str) -> None:
        previous = RunDirectory(self.state_dir, name).read()
        if previous is not None and not previous.finished and previous.runner_alive():
            raise JobExistsError(
                f"job {name} is already running locally (runner pid {previous.runner_pid}); "
                "delete it first or choose another metadata.name"
            )

    def get(self, kind: JobKind, namespace: str, name: str) -> Job:
        directory = RunDirectory(self.state_dir, name)
        record = directory.read()
        job = None if record is None else self._job(record)
        if job is None or kind.kind != job.KIND or kind.api_version != job.API_VERSION:
            raise JobNotFoundError(f"{kind.kind} {name} not found: no local run of it under {self.state_dir}")
        return job

    def list_jobs(
        self, kind: JobKind | None, namespace: str | None, label_selector: str | None = None
    ) -> list[Job]:
        jobs = [self._job(r) for r in list_runs(self.state_dir)]
        return [
            j
            for j in jobs
            if (kind is None or (kind.kind, kind.api_version) == (j.KIND, j.API_VERSION))
            and matches(label_selector, j.metadata.labels or {})
        ]

    def patch(self, kind: JobKind, namespace: str, name: str, patch: Mapping[str, Any]) -> Job:
        from kubetrain.engine.admission import admit

        current = self.get(kind, namespace, name)
        directory = RunDirectory(self.state_dir, name)
        manifest, runtimes = self._manifest(directory, current)
        merged = _merge(manifest, patch)
        if isinstance(current, TrainJob):
            from kubetrain.local.trainjob import parse_trainjob

            changed: Job = parse_trainjob(merged)
        else:
            changed = admit(parse_job(merged, strict=True))
        self._stop(directory)
        self._start(directory, changed, runtimes)
        return self._job(self._record(directory))

    def scale(self, kind: JobKind, namespace: str, name: str, replicas: int) -> Job:
        replica_type = kind.v1_framework.scale_replica_type
        if replica_type is None:
            raise ValueError(f"{kind.kind} has no scale subresource; change its replicas with update_job")
        current = self.get(kind, namespace, name)
        assert isinstance(current, TrainingJob)
        field = current.replica_specs_path.removeprefix("spec.")
        return self.patch(kind, namespace, name, {"spec": {field: {replica_type: {"replicas": replicas}}}})

    def delete(
        self,
        kind: JobKind,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
    ) -> None:
        """Stop the run (its replicas always go with it) and remove its state."""
        self.get(kind, namespace, name)
        directory = RunDirectory(self.state_dir, name)
        self._stop(directory)
        record = directory.read()
        if record is not None:
            # Imported here: the container runtime's modules are for runs and deletes, not every listing.
            from kubetrain.local.containers import remove_job_containers

            remove_job_containers(record.runtime, name)
        shutil.rmtree(directory.root, ignore_errors=True)

    def watch(self, kind: JobKind | None, namespace: str | None) -> JobWatch:
        """Every local run (namespaces do not separate them), from the state directory."""
        from kubetrain.sdk.backends.local_watch import LocalJobWatch

        return LocalJobWatch(self.state_dir, kind)

    # --- pods, logs, events --------------------------------------------------------------------

    def pods(self, namespace: str, job_name: str, labels: Mapping[str, str]) -> list[Pod]:
        directory = RunDirectory(self.state_dir, job_name)
        record = directory.read()
        if record is None:
            return []
        job = _run_job(record)
        pods = [_pod(job, replica) for replica in record.replicas]
        return [p for p in pods if all((p.metadata.labels or {}).get(k) == v for k, v in labels.items())]  # type: ignore[union-attr]

    def restarts(self, namespace: str, job_name: str) -> int:
        record = RunDirectory(self.state_dir, job_name).read()
        return record.restarts if record is not None else 0

    def logs(
        self,
        namespace: str,
        job_name: str,
        pods: list[str],
        *,
        container: str | None,
        follow: bool,
        tail_lines: int | None,
        containers: Mapping[str, str] | None = None,
    ) -> Iterator[LogLine]:
        """A process has one output, whatever container is asked for."""
        directory = RunDirectory(self.state_dir, job_name)
        record = directory.read()
        if record is None:
            raise JobNotFoundError(f"no local run of job {job_name!r} under {self.state_dir}")
        job = _run_job(record)
        replica_of = {_pod_name(job, r): r.name for r in record.replicas}
        unknown = [p for p in pods if p not in replica_of]
        if unknown:
            raise JobNotFoundError(
                f"job {job_name} has no pod {unknown[0]!r}; it has: {', '.join(replica_of) or 'none yet'}"
            )
        yield from _follow_logs(directory, {p: replica_of[p] for p in pods}, follow, tail_lines)

    def events(
        self,
        namespace: str,
        kind: str,
        job_name: str,
        pod_names: list[str],
        related: Sequence[tuple[str, str]] = (),
    ) -> list[JobEvent]:
        """The runner's events, all about the job (it has no pods or JobSet to tell apart)."""
        record = RunDirectory(self.state_dir, job_name).read()
        if record is None:
            return []
        return [
            JobEvent(
                type=str(e.get("type", "")),
                reason=str(e.get("reason", "")),
                message=str(e.get("message", "")),
                involved=f"{kind}/{job_name}",
                count=int(e.get("count", 1)),
                last_seen=read_time(e.get("lastTimestamp")),  # absent in records of older runs
            )
            for e in record.shown_events()
        ]

    # --- the runner ----------------------------------------------------------------------------

    def _start(self, directory: RunDirectory, job: Job, runtimes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Start ``kubetrain run`` on the job's manifest (with the runtimes a TrainJob may name after it)."""
        directory.root.mkdir(parents=True, exist_ok=True)
        manifest = directory.root / MANIFEST_FILE
        wire = job.to_wire()
        wire.pop("status", None)
        import yaml

        documents = [wire, *(dict(r) for r in runtimes)]
        manifest.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
        runner_log = directory.root / RUNNER_LOG_FILE
        with runner_log.open("wb") as log:
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RUN_COMMAND,
                    "run",
                    str(manifest),
                    "--state-dir",
                    str(self.state_dir),
                    "--runtime",
                    str(self.runtime),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,  # Ctrl-C in the notebook or terminal must not stop the run
            )
        self._children[job.name] = child
        deadline = time.monotonic() + RUNNER_START_TIMEOUT
        while time.monotonic() < deadline:
            record = directory.read()
            if record is not None and record.runner_pid == child.pid:
                return
            if child.poll() is not None:
                output = runner_log.read_text(encoding="utf-8", errors="replace").strip()
                raise TrainingApiError(
                    f"the local run of {job.name} did not start: {output or child.returncode}"
                )
            time.sleep(0.05)
        raise TrainingApiError(
            f"the local run of {job.name} did not report within {RUNNER_START_TIMEOUT:g}s; see {runner_log}"
        )

    def _stop(self, directory: RunDirectory) -> None:
        """SIGTERM the runner (it stops its replicas and records the end) and wait for it."""
        record = directory.read()
        if record is None or record.finished or not record.runner_alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.runner_pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while record is not None and not record.finished and record.runner_alive():
            child = self._children.get(record.name)
            if child is not None:
                child.poll()  # reap our own child, or it lingers as a zombie that looks alive
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(record.runner_pid, signal.SIGKILL)
                break
            time.sleep(0.05)
            record = directory.read()
        child = self._children.pop(directory.root.name, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)

    def _record(self, directory: RunDirectory) -> RunRecord:
        record = directory.read()
        if record is None:
            raise JobNotFoundError(f"the local run under {directory.root} has no status")
        return record

    def _manifest(self, directory: RunDirectory, job: Job) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The job as last started, and the runtimes started with it."""
        path = directory.root / MANIFEST_FILE
        if path.exists():
            import yaml

            loaded = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
            if loaded:
                return loaded[0], loaded[1:]
        wire = job.to_wire()
        wire.pop("status", None)
        return wire, []

    def _job(self, record: RunRecord) -> Job:
        child = self._children.get(record.name)
        if child is not None:
            child.poll()
        wire = record.job_wire()
        if is_trainjob(wire):
            return TrainJob.model_validate(wire)
        return parse_job(wire)

    def progress_history(self, kind: JobKind, namespace: str, name: str) -> ProgressHistory:
        """The history the run keeps in its record (bounded: ``ProgressHistory``'s points)."""
        self.get(kind, namespace, name)
        record = RunDirectory(self.state_dir, name).read()
        return ProgressHistory.from_json(record.progress_history if record is not None else None)

    def diagnose(self, kind: JobKind, namespace: str, name: str) -> list[Finding]:
        """What the runner diagnosed at its last reconcile (it keeps its findings in status.json): current
        while the run goes on; for a finished run, what it showed as it ended (the OOM kill that failed it).
        A run whose runner is gone shows nothing: nothing it recorded is current any more."""
        self.get(kind, namespace, name)
        record = RunDirectory(self.state_dir, name).read()
        if record is None or record.stale:
            return []
        return [
            Finding(
                str(f.get("reason", "")),
                str(f.get("message", "")),
                tuple(str(r) for r in f.get("replicas", [])),
            )
            for f in record.shown_findings()
        ]

    def failures(self, kind: JobKind, namespace: str, name: str) -> FailureRecord | None:
        """What the runner kept of the run's failures in its record (``engine.failures``)."""
        self.get(kind, namespace, name)
        record = RunDirectory(self.state_dir, name).read()
        return FailureRecord.from_json(record.failures) if record is not None else None


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged


def _run_job(record: RunRecord) -> TrainingJob:
    """The job the runner runs (a TrainJob's: its JobSet's run), whose replicas are the processes."""
    return parse_job(record.job)


def _pod_name(job: TrainingJob, replica: ReplicaRecord) -> str:
    return framework_for(job).pod_name(job, replica.replica_type, replica.index)


_POD_PHASES = {"Pending", "Running", "Succeeded", "Failed"}


def _pod(job: TrainingJob, replica: ReplicaRecord) -> Pod:
    """What a pod of this replica would say: its name, labels, phase and restarts."""
    from lightkube.models.core_v1 import ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Pod

    framework = framework_for(job)
    phase = replica.phase if replica.phase in _POD_PHASES else "Unknown"
    return Pod(
        metadata=ObjectMeta(
            name=_pod_name(job, replica),
            namespace=job.namespace,
            labels=framework.replica_labels(job, replica.replica_type, replica.index),
            annotations={"kubetrain.io/local-pid": str(replica.pid)} if replica.pid else None,
        ),
        status=PodStatus(
            phase=phase,
            containerStatuses=[
                ContainerStatus(
                    name=kind_of(job).default_container,
                    image="",
                    imageID="",
                    ready=replica.phase == "Running",
                    restartCount=replica.restarts,
                    state=ContainerState(terminated=ContainerStateTerminated(exitCode=replica.exit_code))
                    if replica.exit_code is not None and replica.phase in ("Succeeded", "Failed")
                    else None,
                )
            ],
        ),
    )


def _tail(path: Path, lines: int) -> tuple[list[str], int]:
    """The last ``lines`` complete lines of ``path`` and the byte offset just after them."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    text = complete.decode("utf-8", errors="replace")
    kept = text.split("\n")[:-1][-lines:] if lines > 0 else []
    return kept, len(complete)


def _follow_logs(
    directory: RunDirectory, replicas: Mapping[str, str], follow: bool, tail_lines: int | None
) -> Iterator[LogLine]:
    """Every line of each replica's log, in order per replica; following polls until the run ends."""
    offsets = dict.fromkeys(replicas, 0)
    partial = dict.fromkeys(replicas, "")
    if tail_lines is not None:
        for pod, replica in replicas.items():
            path = directory.log_path(replica)
            if path.exists():
                lines, offsets[pod] = _tail(path, tail_lines)
                for line in lines:
                    yield LogLine(pod, line)
    while True:
        for pod, replica in replicas.items():
            path = directory.log_path(replica)
            if not path.exists():
                continue
            with path.open("r", encoding="utf-8", errors="replace") as handle:
                handle.seek(offsets[pod])
                chunk = handle.read()
                offsets[pod] = handle.tell()
            *complete, partial[pod] = (partial[pod] + chunk).split("\n")
            for line in complete:
                yield LogLine(pod, line)
        if not follow:
            break
        current = directory.read()
        if current is None or current.finished or current.stale:
            follow = False  # one last read picks up whatever was written before the end
            continue
        time.sleep(FOLLOW_POLL)
    for pod in replicas:
        if partial[pod]:
            yield LogLine(pod, partial[pod])
