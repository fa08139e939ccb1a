"""One conformance case on one side: an operator's namespace on the envtest, the job, its steps, a snapshot.

Each side gets the same manifest (under the same name) and the same steps: the pod driver plays the kubelet
for both alike, and after each step the side must have *settled* (nothing about the job changed for
``QUIET_SECONDS``: its status, pods and events; for kubetrain also nothing queued), so both operators react
to the same states. Then the side's snapshot (``kubetrain.envtest.conformance.Snapshot``) is taken; the
peer's and kubetrain's are compared field by field. A step one side cannot take (the pod it needs never
came) is a difference too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from kubetrain.api.jobs import JOB_MODELS
from kubetrain.envtest.conformance import (
    WHOLE,
    Comparison,
    Difference,
    Snapshot,
    compare,
    mark_spam_filtered,
    recorded_events,
)
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.peers import free_port
from kubetrain.envtest.poddriver import PodDriver

KUBETRAIN = Path(sys.executable).parent / "kubetrain"
QUIET_SECONDS = float(os.environ.get("KUBETRAIN_PEERS_QUIET_SECONDS", "0.6"))
"""How long nothing about a job may change before a side counts as settled. Both operators react to a
change within tens of milliseconds on an idle machine; the margin is for a loaded one."""
DUMP = Path(os.environ["KUBETRAIN_PEERS_DUMP"]) if os.environ.get("KUBETRAIN_PEERS_DUMP") else None
"""Where to write each side's snapshot as JSON, to read what differs in full."""
POLL_SECONDS = 0.2
SETTLE_TIMEOUT = 60.0
AWAIT_TIMEOUT = 180.0
"""The mpi-operator v0.6.0 takes a minute or more to see its launcher Job end under load (its Job status is
the controller-manager's; its reaction's p99 was 142 s at a load of 14 in docs/benchmarks.md): 30 s cut a cold
CI run's TTL case short, and 90 s a warm eight-lane run's. Only a side that is late waits."""
POD_TIMEOUT = 30.0
UNSEEN_PREREQUISITE = "must be created before the TrainJob is created"
"""Trainer's TrainJob webhook looks the job's TrainingRuntime up in its informer cache, so it refuses a job
whose runtime was created a moment before (a case's prerequisite) and is not in that cache yet: a CI run's
``plainml-fails`` was refused so. Such a refusal is the peer's cache lag, not its verdict on the case."""
PREREQUISITE_TIMEOUT = 10.0

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""What a TrainJob's pods are found by: its JobSet has the TrainJob's name."""
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
"""A TrainJob's pod's replicated job (``node``, ``launcher``, ``dataset-initializer``): its replica type."""
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
"""A TrainJob's pod's index in its (Indexed) Job: its replica index."""
JOB_KEY_LABEL = "jobset.sigs.k8s.io/job-key"
"""JobSet's hash of a Job's namespace and name: different in each side's namespace, made the same."""
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"

PLURALS = {**{model.KIND: model.PLURAL for model in JOB_MODELS}, "TrainJob": "trainjobs"}
WITHOUT_CREATED = {"TrainJob"}
"""Kinds with no ``Created`` condition to await first (Trainer v2 has none, #2621)."""

CHILD_COLLECTIONS: tuple[tuple[str, str, str], ...] = (
    ("/api/v1", "pods", "Pod"),
    ("/api/v1", "services", "Service"),
    ("/api/v1", "configmaps", "ConfigMap"),
    ("/api/v1", "secrets", "Secret"),
    ("/api/v1", "serviceaccounts", "ServiceAccount"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles", "Role"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    ("/apis/batch/v1", "jobs", "Job"),
    ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", "JobSet"),
    ("/apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup"),
)
"""Every kind of object either operator (or the JobSet controller under it) makes for a job; a kind whose CRD
is not installed is skipped (the PodGroup: only the TrainJob cases install it)."""


def replica_specs(manifest: KubeObject) -> dict[str, Any]:
    spec = manifest["spec"]
    return next(v for k, v in spec.items() if k.endswith("ReplicaSpecs"))


# --- the two sides -----------------------------------------------------------------------------------------


@dataclass
class Side:
    """One operator's namespace, and the case's job in it."""

    name: str
    """Whose namespace: ``training-operator``, ``mpi-operator``, ``kubetrain``, ``kubetrain+endpoint``."""
    api: KubeApi
    driver: PodDriver
    namespace: str
    manifest: KubeObject = field(default_factory=dict)
    idle: Callable[[], bool] = lambda: True
    """Whether the operator has nothing queued or under way that the API does not show yet (work queues
    empty, no worker busy, no event waiting to be sent)."""
    activity: Callable[[str, str], int] = lambda namespace, name: 0
    """How many reconciles of the job (namespace, name) the operator finished so far, where only its log
    says (the mpi-operator exposes no work-queue metrics)."""
    events_recorded: Callable[[str], int | None] = lambda uid: None
    """How many events the operator recorded about the object ``uid``, repeats included, where its log says
    (a peer's recorder may have dropped some of them); None where it does not say."""
    job_uid: str | None = None
    failure: str | None = None
    """Why the last step could not be taken here (the steps after it are skipped)."""
    waited_out: list[str] = field(default_factory=list)
    """The awaits that ran to their timeout here."""

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def job_name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    @property
    def pod_selector(self) -> str:
        """The label selector of the job's pods."""
        label = JOBSET_NAME_LABEL if self.kind == "TrainJob" else JOB_NAME_LABEL
        return f"{label}={self.job_name}"

    @property
    def job_path(self) -> str:
        group = f"/apis/{self.manifest['apiVersion']}/namespaces/{self.namespace}"
        return f"{group}/{PLURALS[self.kind]}/{self.job_name}"

    def create(self, manifest: KubeObject) -> None:
        self.manifest = copy.deepcopy(manifest)
        self.manifest["metadata"] = {**self.manifest["metadata"], "namespace": self.namespace}
        collection = self.job_path.rsplit("/", 1)[0]
        self.job_uid = self.api.create(collection, self.manifest)["metadata"]["uid"]

    def job(self) -> KubeObject | None:
        return self.api.get_or_none(self.job_path)

    def children(self) -> list[KubeObject]:
        """Every object in the namespace that the job owns, directly or through another (the launcher Job's
        pod), with its kind and apiVersion (a list's items have neither)."""
        everything: list[KubeObject] = []
        for prefix, plural, kind in CHILD_COLLECTIONS:
            try:
                items = self.api.get(f"{prefix}/namespaces/{self.namespace}/{plural}")["items"]
            except ApiError as error:
                if error.code == 404:
                    continue
                raise
            api_version = prefix.removeprefix("/api/").removeprefix("/apis/")
            everything.extend({"apiVersion": api_version, "kind": kind, **item} for item in items)
        owned = {self.job_uid}
        children: list[KubeObject] = []
        grew = True
        while grew:
            grew = False
            for obj in everything:
                uid = obj["metadata"]["uid"]
                owners = {o.get("uid") for o in obj["metadata"].get("ownerReferences") or []}
                if uid not in owned and owners & owned:
                    owned.add(uid)
                    children.append(obj)
                    grew = True
        return sorted(children, key=lambda o: (o["kind"], o["metadata"]["name"]))

    def events(self) -> list[KubeObject]:
        """The events about the job (whoever recorded them)."""
        items = self.api.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return [e for e in items if (e.get("involvedObject") or {}).get("uid") == self.job_uid]

    def fingerprint(self) -> str:
        """The job, its pods and its events as they are now, and the operator's reconciles of it where they
        are counted: what every change a step causes touches (read with selectors, as other cases run in
        the namespace at the same time)."""
        job = self.job()
        pods = self.api.get(
            f"/api/v1/namespaces/{self.namespace}/pods", {"labelSelector": self.pod_selector}
        )["items"]
        events = self.api.get(
            f"/api/v1/namespaces/{self.namespace}/events",
            {"fieldSelector": f"involvedObject.uid={self.job_uid}"},
        )["items"]
        state = [
            self.activity(self.namespace, self.job_name),
            (job or {}).get("metadata", {}).get("resourceVersion"),
            sorted((p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in pods),
            sorted((e["metadata"]["name"], e.get("count")) for e in events),
        ]
        return hashlib.sha256(json.dumps(state).encode()).hexdigest()

    def settle(self, quiet: float = QUIET_SECONDS, timeout: float = SETTLE_TIMEOUT) -> None:
        """Until nothing about the job changed for ``quiet`` seconds (or ``timeout``: a job that never rests
        is compared as it is then)."""
        deadline = time.monotonic() + timeout
        last, since = self.fingerprint(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            current = self.fingerprint()
            if current != last or not self.idle():
                last, since = current, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return

    def snapshot(self) -> Snapshot:
        children = self.children()
        replacements = [(self.namespace, "$NAMESPACE")]
        if self.job_uid:
            replacements.append((self.job_uid, "$JOB_UID"))
        for child in children:
            metadata = child["metadata"]
            replacements.append((metadata["uid"], f"$UID({child['kind']} {metadata['name']})"))
            job_key = (metadata.get("labels") or {}).get(JOB_KEY_LABEL)
            if child["kind"] == "Job" and job_key:
                replacements.append((job_key, f"$JOB_KEY({metadata['name']})"))
        return Snapshot.of(self.job(), children, self.events(), replacements)

    # --- what steps do ---

    def pods(self, replica_type: str) -> list[KubeObject]:
        """The live pods of ``replica_type`` (a v2beta1 MPIJob's say it as their ``job-role``, a TrainJob's
        as their replicated job)."""
        if self.kind == "TrainJob":
            selector = f"{self.pod_selector},{REPLICATED_JOB_LABEL}={replica_type}"
        else:
            role = JOB_ROLE_LABEL if self.manifest["apiVersion"].endswith("/v2beta1") else REPLICA_TYPE_LABEL
            selector = f"{JOB_NAME_LABEL}={self.job_name},{role}={replica_type.lower()}"
        items = self.api.get(f"/api/v1/namespaces/{self.namespace}/pods", {"labelSelector": selector})[
            "items"
        ]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def pod(self, replica_type: str, index: int, timeout: float = POD_TIMEOUT) -> KubeObject:
        """The live pod of that replica (a launcher Job's pod has no index: it is index 0)."""
        label = COMPLETION_INDEX_LABEL if self.kind == "TrainJob" else REPLICA_INDEX_LABEL
        deadline = time.monotonic() + timeout
        while True:
            for pod in self.pods(replica_type):
                if int(pod["metadata"].get("labels", {}).get(label, "0")) == index:
                    return pod
            if time.monotonic() > deadline:
                raise StepError(f"no pod of {replica_type} {index} within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)

    def replicas(self, replica_type: str) -> int:
        """Pods of the replica type: as the job says, or for a TrainJob as its JobSet does (the runtime and
        the operator decide the count: a Job's ``parallelism``)."""
        if self.kind == "TrainJob":
            return self._jobset_parallelism(replica_type)
        specs = {k.lower(): v for k, v in replica_specs(self.manifest).items()}
        return int(specs[replica_type.lower()].get("replicas", 1))

    def _jobset_parallelism(self, replicated_job: str) -> int:
        jobset = self.api.get_or_none(f"{JOBSETS}/namespaces/{self.namespace}/jobsets/{self.job_name}")
        for job in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
            if job.get("name") == replicated_job:
                return int(job["template"]["spec"].get("parallelism", 1))
        raise StepError(f"the JobSet {self.job_name} has no replicated job {replicated_job}")

    def create_prerequisites(self, objects: Sequence[KubeObject]) -> None:
        """What the job needs in the namespace before it is created (a TrainingRuntime); one that another
        case created already is kept."""
        for obj in objects:
            body = copy.deepcopy(obj)
            body["metadata"] = {**body["metadata"], "namespace": self.namespace}
            group = "/api/v1" if body["apiVersion"] == "v1" else f"/apis/{body['apiVersion']}"
            plural = PLURALS.get(body["kind"]) or f"{body['kind'].lower()}s"
            try:
                self.api.create(f"{group}/namespaces/{self.namespace}/{plural}", body)
            except ApiError as error:
                if error.code != 409:
                    raise

    def condition(self, type_: str) -> bool | None:
        """Whether the job has the condition True; None when the job is gone."""
        job = self.job()
        if job is None:
            return None
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c["type"] == type_ and c["status"] == "True" for c in conditions)


class StepError(RuntimeError):
    """A step this side could not take."""


# --- steps -------------------------------------------------------------------------------------------------


class Step(Protocol):
    def apply(self, side: Side) -> None: ...


def _indices(side: Side, replica_type: str, indices: tuple[int, ...] | None) -> tuple[int, ...]:
    return indices if indices is not None else tuple(range(side.replicas(replica_type)))


@dataclass(frozen=True)
class Run:
    """The replicas' pods Running and Ready (all of the type when no indices are given)."""

    replica_type: str
    indices: tuple[int, ...] | None = None

    def apply(self, side: Side) -> None:
        for index in _indices(side, self.replica_type, self.indices):
            side.driver.run(side.pod(self.replica_type, index))

    def __str__(self) -> str:
        return f"run {self.replica_type} {_which(self.indices)}"


@dataclass(frozen=True)
class Succeed:
    replica_type: str
    indices: tuple[int, ...] | None = None

    def apply(self, side: Side) -> None:
        for index in _indices(side, self.replica_type, self.indices):
            side.driver.succeed(side.pod(self.replica_type, index))

    def __str__(self) -> str:
        return f"{self.replica_type} {_which(self.indices)} exit 0"


@dataclass(frozen=True)
class Fail:
    """The pod Failed: its containers exited with ``exit_code`` (what a kubelet reports under Never)."""

    replica_type: str
    index: int = 0
    exit_code: int = 1

    def apply(self, side: Side) -> None:
        side.driver.fail(side.pod(self.replica_type, self.index), self.exit_code)

    def __str__(self) -> str:
        return f"{self.replica_type} {self.index} fails with exit code {self.exit_code}"


@dataclass(frozen=True)
class RestartInPlace:
    """The container exited with ``exit_code`` and the kubelet restarted it (OnFailure, Always)."""

    replica_type: str
    index: int = 0
    exit_code: int = 1

    def apply(self, side: Side) -> None:
        side.driver.restart(side.pod(self.replica_type, self.index), self.exit_code)

    def __str__(self) -> str:
        return f"{self.replica_type} {self.index} restarted in place after exit code {self.exit_code}"


@dataclass(frozen=True)
class Patch:
    """A merge patch of the job (``{"spec": {"runPolicy": {"suspend": true}}}``)."""

    body: KubeObject
    what: str

    def apply(self, side: Side) -> None:
        side.api.patch(side.job_path, self.body)

    def __str__(self) -> str:
        return self.what


@dataclass(frozen=True)
class Await:
    """Until the job has the condition True, or is gone: a TTL case's job may be deleted a second after it
    finished, before the side settled, and a job that is gone gets no condition (the wait used to run to its
    timeout there, 90 s a side). A side that never gets it is compared as it is."""

    condition: str
    timeout: float = AWAIT_TIMEOUT

    def apply(self, side: Side) -> None:
        deadline = time.monotonic() + self.timeout
        while side.condition(self.condition) is False:
            if time.monotonic() > deadline:
                side.waited_out.append(str(self))
                return
            time.sleep(POLL_SECONDS)

    def __str__(self) -> str:
        return f"await {self.condition}"


@dataclass(frozen=True)
class AwaitDeleted:
    """Until the job is gone (its TTL) and so is everything it owned: the garbage collector deletes those
    after the job, in its own time (a cold CI run's load kept an upstream MPIJob's pods and ConfigMap there
    after the side had settled, and the snapshot compared them)."""

    timeout: float = AWAIT_TIMEOUT

    def apply(self, side: Side) -> None:
        deadline = time.monotonic() + self.timeout
        while side.job() is not None or side.children():
            if time.monotonic() > deadline:
                side.waited_out.append(str(self))
                return
            time.sleep(POLL_SECONDS)

    def __str__(self) -> str:
        return "await the job's deletion and its children's collection"


@dataclass(frozen=True)
class AwaitJobsStatus:
    """Until a TrainJob's ``status.jobsStatus`` has these counts for these replicated jobs (``{"node":
    {"active": 1}}``): the end of a chain of three controllers (Job, JobSet, TrainJob), each of which may
    be slower than a side's quiet period on a loaded machine. A side that never gets there is compared as it
    is."""

    counts: Mapping[str, Mapping[str, int]]
    timeout: float = AWAIT_TIMEOUT

    def reached(self, side: Side) -> bool:
        statuses = ((side.job() or {}).get("status") or {}).get("jobsStatus") or []
        by_name = {s.get("name"): s for s in statuses}
        return all(
            (by_name.get(job) or {}).get(field) == value
            for job, expected in self.counts.items()
            for field, value in expected.items()
        )

    def apply(self, side: Side) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.reached(side):
            if time.monotonic() > deadline:
                side.waited_out.append(str(self))
                return
            time.sleep(POLL_SECONDS)

    def __str__(self) -> str:
        return f"await jobsStatus {dict(self.counts)}"


@dataclass(frozen=True)
class AwaitPodsGone:
    """Until none of the job's pods is left (a TrainJob's, once its JobSet was deleted)."""

    timeout: float = AWAIT_TIMEOUT

    def apply(self, side: Side) -> None:
        path = f"/api/v1/namespaces/{side.namespace}/pods"
        deadline = time.monotonic() + self.timeout
        while side.api.get(path, {"labelSelector": side.pod_selector})["items"]:
            if time.monotonic() > deadline:
                raise StepError(f"its pods not gone within {self.timeout:.0f} s")
            time.sleep(POLL_SECONDS)

    def __str__(self) -> str:
        return "await its pods' deletion"


@dataclass(frozen=True)
class AwaitLauncherJobDeleted:
    """Until the job's launcher Job is gone (a v2beta1 MPIJob's TTL: the mpi-operator sets it on the launcher
    Job, which Kubernetes' TTL controller deletes; the MPIJob itself stays)."""

    timeout: float = AWAIT_TIMEOUT

    def apply(self, side: Side) -> None:
        path = f"/apis/batch/v1/namespaces/{side.namespace}/jobs/{side.job_name}-launcher"
        deadline = time.monotonic() + self.timeout
        while side.api.exists(path):
            if time.monotonic() > deadline:
                side.waited_out.append(str(self))
                return
            time.sleep(POLL_SECONDS)

    def __str__(self) -> str:
        return "await the launcher Job's deletion"


def _which(indices: tuple[int, ...] | None) -> str:
    return "all" if indices is None else ",".join(map(str, indices))


# --- a case ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    manifest: KubeObject
    steps: tuple[Step, ...] = ()
    prerequisites: tuple[KubeObject, ...] = ()
    """Objects created in the side's namespace before the job (a TrainJob's TrainingRuntime)."""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Outcome:
    """What one operator made of a case."""

    snapshot: Snapshot
    failure: str | None
    """The step it could not take, if any (the steps after it were skipped)."""
    events_dropped: bool = False
    """The operator recorded more events about the job than reached the API (client-go's spam filter)."""
    waited_out: tuple[str, ...] = ()
    """The awaits that ran to their timeout (the side never got there)."""


def _create_once_prerequisites_seen(case: Case, side: Side) -> None:
    """The case's job created, sent again while a peer's webhook has not yet seen its prerequisites."""
    deadline = time.monotonic() + PREREQUISITE_TIMEOUT
    while True:
        try:
            side.create(case.manifest)
            return
        except ApiError as error:
            unseen = case.prerequisites and UNSEEN_PREREQUISITE in error.message
            if not unseen or time.monotonic() > deadline:
                raise
        time.sleep(POLL_SECONDS)


def run_on(case: Case, side: Side, *, clean_up_after: bool = False) -> Outcome:
    """The case on one side: its job created, each step taken and the side settled after it, then its
    snapshot. ``clean_up_after``: the job deleted (and its pods gone) afterwards, for a case of the same
    name to follow; else it stays until its namespace goes."""
    side.create_prerequisites(case.prerequisites)
    try:
        _create_once_prerequisites_seen(case, side)
    except ApiError as error:
        # Refused at admission (a peer's webhook): that is what this side made of it.
        return _outcome(case, side, f"create: refused: {error.message}")
    try:
        if side.kind not in WITHOUT_CREATED:
            Await("Created").apply(side)
        side.settle()
        failure = None
        for step in case.steps:
            try:
                step.apply(side)
            except Exception as error:  # any failure is this side's: recorded, compared
                failure = f"{step}: {error}"
                break
            side.settle()
        return _outcome(case, side, failure)
    finally:
        if clean_up_after:
            clean_up(side)


def _outcome(case: Case, side: Side, failure: str | None) -> Outcome:
    snapshot = side.snapshot()
    recorded = side.events_recorded(side.job_uid or "")
    dropped = recorded is not None and recorded > recorded_events(snapshot.objects)
    if DUMP is not None:
        DUMP.mkdir(parents=True, exist_ok=True)
        text = json.dumps(snapshot.objects, indent=1, default=repr)
        (DUMP / f"{case.name}.{side.name}.json").write_text(text)
    return Outcome(snapshot, failure, dropped, tuple(side.waited_out))


def compare_outcomes(case: str, peer: Outcome, kubetrain: Outcome, *, peer_drops_events: bool) -> Comparison:
    """The two snapshots field by field; a step only one side could take is a difference too. Where the peer
    (``peer_drops_events``) dropped some of its events, the differences that explains are marked."""
    result = compare(case, peer.snapshot.objects, kubetrain.snapshot.objects)
    if peer_drops_events and peer.events_dropped:
        result = mark_spam_filtered(result)
    if peer.failure or kubetrain.failure:
        result.differences.append(Difference(case, "Steps", WHOLE, peer.failure, kubetrain.failure))
    return result


def clean_up(side: Side, timeout: float = 60.0) -> None:
    """Delete the job; wait until it and its pods are gone, so a case of the same name may follow."""
    try:
        side.api.delete(side.job_path, {"propagationPolicy": "Background"})
    except ApiError as error:
        if error.code != 404:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = side.api.get(
            f"/api/v1/namespaces/{side.namespace}/pods", {"labelSelector": side.pod_selector}
        )["items"]
        if side.job() is None and not pods:
            return
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"{side.name}: {side.job_name} and its pods not gone within {timeout:.0f} s")


# --- kubetrain's operator ----------------------------------------------------------------------------------


class KubetrainOperator:
    """``kubetrain operator`` watching one namespace, as a subprocess; ready once its caches synced."""

    def __init__(self, kubeconfig: Path, namespace: str, log_path: Path, flags: Sequence[str]) -> None:
        self.log_path = log_path
        self.metrics_port = free_port()
        command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace]
        command += ["--metrics-bind-address", f"127.0.0.1:{self.metrics_port}"]
        command += ["--health-probe-bind-address", "0", *flags]
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while "caches synced" not in self.log:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kubetrain operator did not start:\n{self.log[-3000:]}")
            time.sleep(0.1)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def activity(self, namespace: str, name: str) -> int:
        return 0

    def events_recorded(self, uid: str) -> int | None:
        return None  # it drops none: repeats are folded into counts, however many

    def idle(self) -> bool:
        """No Event recorded and not yet posted, no job key waiting in a work queue (its /metrics)."""
        return metrics_all_zero(self.metrics_port, ("kubetrain_events_queued", "kubetrain_work_queue_depth"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def metrics_all_zero(port: int, prefixes: tuple[str, ...]) -> bool:
    """Whether every sample on 127.0.0.1:``port``/metrics whose name starts with one of ``prefixes`` is 0."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefixes)]
    return not any(values)


def create_namespace(api: KubeApi, name: str) -> str:
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
